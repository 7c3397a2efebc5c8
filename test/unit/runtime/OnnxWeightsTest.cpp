//===- OnnxWeightsTest.cpp - Initializers in, trained weights out -----------===//

#include "TestPlans.h"
#include "runtime/Session.h"
#include "runtime/onnx/OnnxWeights.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

class OnnxWeightsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "/onnxw_" + std::to_string(getpid());
    mkdir(dir.c_str(), 0777);
    modelPath = dir + "/model.onnx";
    onnx::ModelProto model;
    model.set_ir_version(8);
    onnx::GraphProto *g = model.mutable_graph();
    g->set_name("g");
    // float_data
    onnx::TensorProto *a = g->add_initializer();
    a->set_name("a");
    a->set_data_type(onnx::TensorProto::FLOAT);
    a->add_dims(2);
    a->add_dims(2);
    for (float v : {1.f, 2.f, 3.f, 4.f})
      a->add_float_data(v);
    // raw_data
    onnx::TensorProto *b = g->add_initializer();
    b->set_name("b");
    b->set_data_type(onnx::TensorProto::FLOAT);
    b->add_dims(3);
    float raw[3] = {-1, 0.5, 7};
    b->set_raw_data(std::string(reinterpret_cast<char *>(raw), sizeof(raw)));
    // int64_data
    onnx::TensorProto *c = g->add_initializer();
    c->set_name("c");
    c->set_data_type(onnx::TensorProto::INT64);
    c->add_dims(2);
    c->add_int64_data(42);
    c->add_int64_data(-7);
    // external data at offset 8 of weights.bin
    onnx::TensorProto *e = g->add_initializer();
    e->set_name("e");
    e->set_data_type(onnx::TensorProto::FLOAT);
    e->add_dims(2);
    e->set_data_location(onnx::TensorProto::EXTERNAL);
    auto *loc = e->add_external_data();
    loc->set_key("location");
    loc->set_value("weights.bin");
    auto *off = e->add_external_data();
    off->set_key("offset");
    off->set_value("8");
    auto *len = e->add_external_data();
    len->set_key("length");
    len->set_value("8");
    float ext[4] = {0, 0, 9.5, -3};
    std::ofstream(dir + "/weights.bin", std::ios::binary)
        .write(reinterpret_cast<char *>(ext), sizeof(ext));
    std::ofstream out(modelPath, std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
  }

  std::string dir, modelPath;
};

TEST_F(OnnxWeightsTest, ReadsEveryStorageKind) {
  auto w = OnnxWeights::load(modelPath);
  ASSERT_TRUE(w.isOk()) << w.status().message();
  auto a = (*w)->get("a", ElemType::F32);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a->toF32(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ((*w)->get("b", ElemType::F32)->toF32(),
            (std::vector<float>{-1, 0.5, 7}));
  auto c = (*w)->get("c", ElemType::I64);
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c->data<int64_t>()[0], 42);
  EXPECT_EQ(c->data<int64_t>()[1], -7);
  auto e = (*w)->get("e", ElemType::F32);
  ASSERT_TRUE(e.isOk()) << e.status().message();
  EXPECT_EQ(e->toF32(), (std::vector<float>{9.5, -3}));
}

TEST_F(OnnxWeightsTest, Errors) {
  auto w = OnnxWeights::load(modelPath);
  ASSERT_TRUE(w.isOk());
  auto missing = (*w)->get("zz", ElemType::F32);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().message().find("no initializer named 'zz'"),
            std::string::npos);
  auto kind = (*w)->get("c", ElemType::F32);
  ASSERT_FALSE(kind.isOk());
  EXPECT_NE(kind.status().message().find("is integer but the plan expects float32"),
            std::string::npos);
  EXPECT_FALSE(OnnxWeights::load(dir + "/nope.onnx").isOk());
}

TEST_F(OnnxWeightsTest, ExternalDataMissingOrShortNamesTensorAndFile) {
  auto w = OnnxWeights::load(modelPath);
  ASSERT_TRUE(w.isOk());
  std::string file = dir + "/weights.bin";
  // 12 bytes: [8, 16) is cut short.
  float some[3] = {0, 0, 1};
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<char *>(some), sizeof(some));
  auto shortData = (*w)->get("e", ElemType::F32);
  ASSERT_FALSE(shortData.isOk());
  EXPECT_NE(shortData.status().message().find(
                "initializer 'e' needs bytes [8, 16) of '" + file +
                "', which has only 12 bytes"),
            std::string::npos)
      << shortData.status().message();
  std::remove(file.c_str());
  auto missing = (*w)->get("e", ElemType::F32);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(
      missing.status().message().find("initializer 'e' stores its data in '" +
                                      file + "', which cannot be opened"),
      std::string::npos)
      << missing.status().message();
  EXPECT_EQ(missing.status().message().find('\n'), std::string::npos);
}

TEST_F(OnnxWeightsTest, PlanInitialisesFromOnnxAndExportsTrainedWeights) {
  // y = x . a with a from the model, trained one SGD step; export replaces `a`
  // and inlines `e`.
  plan::Plan p = makeLinearRegressionPlan(1, 2, 2, 2, 0.5, std::vector<float>(4, 0));
  p.set_model_path(modelPath);
  plan::Buffer &w = *p.mutable_programs(0)->mutable_buffers(2);
  w.set_binding("a");
  w.set_onnx_initializer("a");
  LocalCommunicator world;
  auto s = Session::create(p, world);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  EXPECT_EQ((*s)->readBuffer("a")->toF32(), (std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE((*s)->attachData("x", HostTensor::fromF32({2, 2}, {1, 0, 0, 1})).isOk());
  ASSERT_TRUE((*s)->attachData("target", HostTensor::fromF32({2, 2}, {1, 2, 3, 4})).isOk());
  ASSERT_TRUE((*s)->runStep(0).isOk());
  EXPECT_NEAR(*(*s)->loss(), 0.0, 1e-7); // x = I, target = a
  ASSERT_TRUE((*s)->attachData("target", HostTensor::fromF32({2, 2}, {0, 0, 0, 0})).isOk());
  ASSERT_TRUE((*s)->runStep(1).isOk());
  std::vector<float> trained = (*s)->readBuffer("a")->toF32();
  // grad = 2/4 * (a - 0) = a/2; a -= 0.5 * a/2.
  EXPECT_EQ(trained, (std::vector<float>{0.75, 1.5, 2.25, 3}));

  std::string out = dir + "/trained.onnx";
  ASSERT_TRUE((*s)->exportOnnx(out).isOk());
  onnx::ModelProto model;
  std::ifstream in(out, std::ios::binary);
  ASSERT_TRUE(model.ParseFromIstream(&in));
  ASSERT_EQ(model.graph().initializer_size(), 4);
  const onnx::TensorProto &a = model.graph().initializer(0);
  EXPECT_EQ(a.float_data_size(), 0);
  ASSERT_EQ(a.raw_data().size(), 16u);
  EXPECT_EQ(reinterpret_cast<const float *>(a.raw_data().data())[3], 3.0f);
  const onnx::TensorProto &e = model.graph().initializer(3);
  EXPECT_EQ(e.data_location(), onnx::TensorProto::DEFAULT);
  EXPECT_EQ(e.external_data_size(), 0);
  auto reread = OnnxWeights::load(out);
  ASSERT_TRUE(reread.isOk());
  EXPECT_EQ((*reread)->get("e", ElemType::F32)->toF32(), (std::vector<float>{9.5, -3}));
  EXPECT_EQ((*reread)->get("a", ElemType::F32)->toF32(), trained);
}

TEST_F(OnnxWeightsTest, TiedCopiesAreExportedFromTheirParameter) {
  // The plan ties initializer `e` to the transpose of parameter `a` (untrained
  // here: [[1, 2], [3, 4]]); the export writes `e` from `a`.
  plan::Plan p = makeLinearRegressionPlan(1, 2, 2, 2, 0.5, std::vector<float>(4, 0));
  p.set_model_path(modelPath);
  plan::Buffer &w = *p.mutable_programs(0)->mutable_buffers(2);
  w.set_binding("a");
  w.set_onnx_initializer("a");
  plan::TiedInitializer *t = p.add_tied_initializers();
  t->set_name("e");
  t->set_parameter("a");
  t->set_transposed(true);
  LocalCommunicator world;
  auto s = Session::create(p, world);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  std::string out = dir + "/tied.onnx";
  ASSERT_TRUE((*s)->exportOnnx(out).isOk());
  auto reread = OnnxWeights::load(out);
  ASSERT_TRUE(reread.isOk());
  auto e = (*reread)->get("e", ElemType::F32);
  ASSERT_TRUE(e.isOk());
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(e->toF32(), (std::vector<float>{1, 3, 2, 4}));

  t->set_parameter("nothing");
  auto bad = Session::create(p, world);
  ASSERT_TRUE(bad.isOk());
  Status st = (*bad)->exportOnnx(dir + "/bad.onnx");
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("tied to 'nothing'"), std::string::npos) << st.message();
}

TEST_F(OnnxWeightsTest, DeduplicatedParametersBecomeInitializersAgain) {
  // `a2 = Identity(a)` (an eval-mode export's merged parameter) trained
  // apart from `a`: the export writes it as an initializer, without the node.
  onnx::ModelProto model;
  {
    std::ifstream in(modelPath, std::ios::binary);
    ASSERT_TRUE(model.ParseFromIstream(&in));
  }
  onnx::NodeProto *id = model.mutable_graph()->add_node();
  id->set_op_type("Identity");
  id->add_input("a");
  id->add_output("a2");
  std::string path = dir + "/dedup.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
  }
  std::map<std::string, HostTensor> values;
  values["a"] = HostTensor::fromF32({2, 2}, {1, 1, 1, 1});
  values["a2"] = HostTensor::fromF32({2, 2}, {5, 6, 7, 8});
  std::string out = dir + "/dedup-trained.onnx";
  ASSERT_TRUE(exportOnnxWithWeights(path, values, out).isOk());
  onnx::ModelProto written;
  std::ifstream in(out, std::ios::binary);
  ASSERT_TRUE(written.ParseFromIstream(&in));
  EXPECT_EQ(written.graph().node_size(), 0);
  auto reread = OnnxWeights::load(out);
  ASSERT_TRUE(reread.isOk());
  EXPECT_EQ((*reread)->get("a2", ElemType::F32)->toF32(),
            (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ((*reread)->get("a", ElemType::F32)->toF32(),
            (std::vector<float>{1, 1, 1, 1}));
}

TEST_F(OnnxWeightsTest, ShardedParametersTakeTheirBlock) {
  // A [1, 2] shard at offset [1, 0] of the 2x2 initializer `a`.
  plan::Plan p = makePlan(1, false);
  p.set_model_path(modelPath);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t id = addBuffer(prog, "a_shard", plan::PARAMETER, {1, 2});
  plan::Buffer &b = buffer(prog, id);
  b.set_onnx_initializer("a");
  b.add_global_shape(2);
  b.add_global_shape(2);
  b.add_shard_offset(1);
  b.add_shard_offset(0);
  LocalCommunicator world;
  auto s = Session::create(p, world);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  EXPECT_EQ((*s)->readBuffer("a_shard")->toF32(), (std::vector<float>{3, 4}));
  // This rank's view alone refuses the shard; the gather over the ranks
  // finds the other half held by none.
  EXPECT_FALSE((*s)->exportOnnx(dir + "/x.onnx").isOk());
  Status gathered = (*s)->exportOnnx(world, dir + "/x.onnx");
  ASSERT_FALSE(gathered.isOk());
  EXPECT_EQ(gathered.message(),
            "plan: parameter 'a': the shards of the ranks hold 2 of the "
            "4 elements of its global shape [2, 2]");
}

} // namespace
