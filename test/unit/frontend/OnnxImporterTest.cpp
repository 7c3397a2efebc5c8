//===- OnnxImporterTest.cpp - Units for the ONNX importer -------*- C++ -*-===//
//
// Models are written as ONNX text into a temporary directory and imported
// from there; real binary files come from Debian's libonnx-testdata.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"

#include "ir/EntryFunction.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;

namespace {

class OnnxImporterTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("loom-frontend", dir));
    handler = std::make_unique<ScopedDiagnosticHandler>(
        &ctx, [this](Diagnostic &diag) {
          errors.push_back(diag.str());
          return success();
        });
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string write(StringRef name, StringRef contents) {
    SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    EXPECT_FALSE(ec) << ec.message();
    os << contents;
    return std::string(path);
  }

  OwningOpRef<ModuleOp> importText(StringRef text,
                                   const OnnxImportOptions &options = {}) {
    return importOnnxFile(&ctx, write("model.onnxtext", text), options);
  }

  /// Imports ONNX text written to a binary file, with every `onnx_` in a
  /// value name spelled `onnx::` as torch's exporter names them (a name the
  /// text syntax cannot write).
  OwningOpRef<ModuleOp> importExporterNames(StringRef text,
                                            const OnnxImportOptions &options) {
    onnx::ModelProto model;
    onnx::Status status = onnx::OnnxParser::Parse(model, text.str().c_str());
    EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
    auto rename = [](std::string *name) {
      if (StringRef(*name).starts_with("onnx_"))
        name->replace(0, 5, "onnx::");
    };
    onnx::GraphProto *g = model.mutable_graph();
    for (auto &init : *g->mutable_initializer())
      rename(init.mutable_name());
    for (auto &node : *g->mutable_node())
      for (auto &in : *node.mutable_input())
        rename(&in);
    return importOnnxFile(&ctx, write("model.onnx", model.SerializeAsString()),
                          options);
  }

  static SmallVector<std::string> paramNames(ModuleOp module) {
    func::FuncOp func = lookupEntryFunction(module);
    SmallVector<std::string> names;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto p = func.getArgAttrOfType<StringAttr>(i, attr::kParam))
        names.push_back(p.str());
    return names;
  }

  /// The single error reported, or "" (and a test failure) otherwise.
  std::string onlyError() {
    EXPECT_EQ(errors.size(), 1u);
    return errors.empty() ? "" : errors.front();
  }

  static func::FuncOp mainOf(ModuleOp module) {
    return lookupEntryFunction(module);
  }

  static SmallVector<std::string> opNames(ModuleOp module) {
    SmallVector<std::string> names;
    mainOf(module).walk([&](Operation *op) {
      if (!isa<func::FuncOp>(op))
        names.push_back(op->getName().getStringRef().str());
    });
    return names;
  }

  MLIRContext ctx;
  SmallString<128> dir;
  std::vector<std::string> errors;
  std::unique_ptr<ScopedDiagnosticHandler> handler;
};

using Names = SmallVector<std::string>;

constexpr const char *kMlp = R"(
// Lines starting with // are lit's; the importer blanks them.
<ir_version: 8, opset_import: ["" : 17]>
mlp (float[N, 1, 2, 2] x) => (float[N, 3] y)
  <float[4, 5] w1 = {1.0,2.0,3.0,4.0,5.0,1.0,2.0,3.0,4.0,5.0,1.0,2.0,3.0,4.0,5.0,1.0,2.0,3.0,4.0,5.0},
   float[5] b1 = {1.0,2.0,3.0,4.0,5.0},
   float[3, 5] w2 = {1.0,2.0,3.0,4.0,5.0,1.0,2.0,3.0,4.0,5.0,1.0,2.0,3.0,4.0,5.0},
   float[3] b2 = {0.0, 0.0, 0.0},
   int64[2] s = {-1, 4},
   float[7] unused = {1.0,2.0,3.0,4.0,5.0,6.0,7.0}>
{
  # ONNX's own comments work too.
  f = Reshape(x, s)
  h = Gemm(f, w1, b1)
  r = Relu(h)
  y = Gemm<transB = 1>(r, w2, b2)
}
)";

//===----------------------------------------------------------------------===//
// Structure of the module
//===----------------------------------------------------------------------===//

TEST_F(OnnxImporterTest, MlpArgumentsResultsAndModuleAttributes) {
  OnnxImportOptions options;
  options.batchSize = 8;
  auto module = importText(kMlp, options);
  ASSERT_TRUE(module) << (errors.empty() ? "" : errors.front());
  auto func = mainOf(*module);
  ASSERT_TRUE(func);

  // Graph input, then float initializers used as data, in initializer order;
  // the integer shape and the unused initializer are not parameters.
  ASSERT_EQ(func.getNumArguments(), 5u);
  EXPECT_EQ(func.getArgAttrOfType<StringAttr>(0, attr::kInput).getValue(), "x");
  const char *params[] = {"w1", "b1", "w2", "b2"};
  for (auto [i, name] : llvm::enumerate(params))
    EXPECT_EQ(func.getArgAttrOfType<StringAttr>(i + 1, attr::kParam).getValue(),
              name);
  EXPECT_EQ(func.getFunctionType().getInput(0),
            RankedTensorType::get({8, 1, 2, 2}, Float32Type::get(&ctx)));
  ASSERT_EQ(func.getNumResults(), 1u);
  EXPECT_EQ(func.getResultAttrOfType<StringAttr>(0, attr::kOutput).getValue(),
            "y");
  EXPECT_EQ(func.getFunctionType().getResult(0),
            RankedTensorType::get({8, 3}, Float32Type::get(&ctx)));

  auto path = (*module)->getAttrOfType<StringAttr>("loom.model_path");
  ASSERT_TRUE(path);
  EXPECT_TRUE(llvm::sys::path::is_absolute(path.getValue()));
  EXPECT_TRUE(path.getValue().ends_with("model.onnxtext"));
  auto opset = (*module)->getAttrOfType<IntegerAttr>("loom.opset");
  ASSERT_TRUE(opset);
  EXPECT_EQ(opset.getInt(), 17);

  EXPECT_EQ(opNames(*module),
            (Names{"loom.reshape", "loom.matmul", "loom.add", "loom.relu",
                   "loom.matmul", "loom.add", "func.return"}));
  EXPECT_TRUE(errors.empty());
}

TEST_F(OnnxImporterTest, NodeLocationsNameTheNodeAndLine) {
  OnnxImportOptions options;
  options.batchSize = 2;
  auto module = importText(kMlp, options);
  ASSERT_TRUE(module);
  ReluOp relu;
  mainOf(*module).walk([&](ReluOp op) { relu = op; });
  ASSERT_TRUE(relu);
  auto name = dyn_cast<NameLoc>(relu.getLoc());
  ASSERT_TRUE(name);
  EXPECT_EQ(name.getName().getValue(), "Relu_2");
  auto file = dyn_cast<FileLineColLoc>(name.getChildLoc());
  ASSERT_TRUE(file);
  EXPECT_TRUE(file.getFilename().getValue().ends_with("model.onnxtext"));
  EXPECT_EQ(file.getLine(), 15u);
  EXPECT_EQ(file.getColumn(), 3u);
}

//===----------------------------------------------------------------------===//
// Op mappings
//===----------------------------------------------------------------------===//

TEST_F(OnnxImporterTest, GemmAttributesBecomeTransposesAndScales) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 4] a, float[5, 3] b, float[5] c) => (float[4, 5] y) {
  y = Gemm<alpha = 0.5, beta = 2.0, transA = 1, transB = 1>(a, b, c)
}
)");
  ASSERT_TRUE(module);
  EXPECT_EQ(opNames(*module), (Names{"loom.matmul", "loom.scale", "loom.scale",
                                     "loom.add", "func.return"}));
  MatmulOp mm;
  SmallVector<double> factors;
  mainOf(*module).walk([&](Operation *op) {
    if (auto m = dyn_cast<MatmulOp>(op))
      mm = m;
    if (auto s = dyn_cast<ScaleOp>(op))
      factors.push_back(s.getFactor().convertToDouble());
  });
  ASSERT_TRUE(mm);
  EXPECT_TRUE(mm.getTransposeLhs());
  EXPECT_TRUE(mm.getTransposeRhs());
  EXPECT_EQ(factors, (SmallVector<double>{0.5, 2.0}));
}

TEST_F(OnnxImporterTest, GemmWithBetaZeroDropsTheBiasParameter) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x) => (float[2, 3] y) <float[4, 3] w = {1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0}, float[3] c = {1.0,2.0,3.0}> {
  y = Gemm<beta = 0.0>(x, w, c)
}
)");
  ASSERT_TRUE(module);
  EXPECT_EQ(opNames(*module), (Names{"loom.matmul", "func.return"}));
  EXPECT_EQ(mainOf(*module).getNumArguments(), 2u);
}

TEST_F(OnnxImporterTest, ElementwiseOpsBroadcast) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, float[3] v, float[2, 1] u) => (float[2, 3] y) {
  a = Add(x, v)
  s = Sub(a, u)
  m = Mul(s, x)
  d = Div(m, v)
  t = Tanh(d)
  r = Relu(t)
  y = Sigmoid(r)
}
)");
  ASSERT_TRUE(module);
  EXPECT_EQ(opNames(*module),
            (Names{"loom.add", "loom.sub", "loom.mul", "loom.div", "loom.tanh",
                   "loom.relu", "loom.sigmoid", "func.return"}));
}

TEST_F(OnnxImporterTest, ReshapeSpecKeepsSharedLeadingDimensions) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 2, 3] x) => (float[4, 6] y) {
  s = Constant<value = int64[2] {4, 6}>()
  y = Reshape(x, s)
}
)");
  ASSERT_TRUE(module);
  ReshapeOp reshape;
  mainOf(*module).walk([&](ReshapeOp op) { reshape = op; });
  ASSERT_TRUE(reshape);
  EXPECT_EQ(reshape.getShape(), (ArrayRef<int64_t>{0, -1}));
}

TEST_F(OnnxImporterTest, BatchBakedIntoReshapeFollowsTheBatchSize) {
  OnnxImportOptions options;
  options.batchSize = 16;
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 2, 3] x) => (float[4, 6] y) <int64[2] s = {4, -1}> {
  y = Reshape(x, s)
}
)",
                           options);
  ASSERT_TRUE(module) << onlyError();
  EXPECT_EQ(mainOf(*module).getFunctionType().getResult(0),
            RankedTensorType::get({16, 6}, Float32Type::get(&ctx)));
}

TEST_F(OnnxImporterTest, FlattenBecomesReshape) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3, 4, 5] x) => (float[6, 20] y) {
  y = Flatten<axis = -2>(x)
}
)");
  ASSERT_TRUE(module);
  EXPECT_EQ(mainOf(*module).getFunctionType().getResult(0),
            RankedTensorType::get({6, 20}, Float32Type::get(&ctx)));
  EXPECT_EQ(opNames(*module), (Names{"loom.reshape", "func.return"}));
}

TEST_F(OnnxImporterTest, IdentityForwardsDataAndShapeOperands) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 6] x) => (float[2, 3, 2] y) <int64[3] s = {2, 3, 2}> {
  i = Identity(x)
  t = Identity(s)
  y = Reshape(i, t)
}
)");
  ASSERT_TRUE(module) << onlyError();
  EXPECT_EQ(opNames(*module), (Names{"loom.reshape", "func.return"}));
}

TEST_F(OnnxImporterTest, ShapeSubgraphsFoldIntoReshapeOperands) {
  OnnxImportOptions options;
  options.batchSize = 8;
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 1, 2, 2] x) => (float[N, 4] y) <int64[1] i = {0}, int64[1] m = {-1}> {
  s = Shape(x)
  d = Gather<axis = 0>(s, i)
  c = Concat<axis = 0>(d, m)
  y = Reshape(x, c)
}
)",
                           options);
  ASSERT_TRUE(module) << onlyError();
  EXPECT_EQ(opNames(*module), (Names{"loom.reshape", "func.return"}));
  EXPECT_EQ(mainOf(*module).getFunctionType().getResult(0),
            RankedTensorType::get({8, 4}, Float32Type::get(&ctx)));
}

TEST_F(OnnxImporterTest, FloatConstantsBecomeLoomConstants) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
  c = Constant<value_float = 0.5>()
  y = Mul(x, c)
}
)");
  ASSERT_TRUE(module);
  ConstantOp constant;
  mainOf(*module).walk([&](ConstantOp op) { constant = op; });
  ASSERT_TRUE(constant);
  EXPECT_EQ(constant.getType(),
            RankedTensorType::get({}, Float32Type::get(&ctx)));
}

// What torch's folded export writes: a tied embedding's transpose as
// `onnx::MatMul_7` (bit for bit `w` transposed), an untied folded weight,
// a uniform copy (all-ones tensors are equal without being tied), a scalar
// exponent and an exporter constant.
constexpr const char *kFolded = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 4] y, float[2, 3] z)
  <float[4, 3] w = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0},
   float[3, 4] onnx_MatMul_7 = {1.0, 4.0, 7.0, 10.0, 2.0, 5.0, 8.0, 11.0, 3.0, 6.0, 9.0, 12.0},
   float[3, 4] onnx_MatMul_9 = {0.5, 4.0, 7.0, 10.0, 2.0, 5.0, 8.0, 11.0, 3.0, 6.0, 9.0, 12.0},
   float[4, 3] u = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
   float[3, 4] onnx_MatMul_11 = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
   float two = {2.0},
   float[3] onnx_Add_5 = {1.0, 2.0, 3.0}>
{
  a = MatMul(x, onnx_MatMul_7)
  b = MatMul(x, onnx_MatMul_9)
  c = MatMul(x, onnx_MatMul_11)
  ab = Add(a, b)
  y = Add(ab, c)
  p = Pow(x, two)
  q = MatMul(a, u)
  pq = Add(p, q)
  z = Add(pq, onnx_Add_5)
}
)";

TEST_F(OnnxImporterTest, ExporterCopiesAreTiedAndConstantsAreNotTrained) {
  auto module = importExporterNames(kFolded, {});
  ASSERT_TRUE(module) << onlyError();
  EXPECT_EQ(paramNames(*module),
            (Names{"w", "onnx::MatMul_9", "u", "onnx::MatMul_11"}));
  auto tied = (*module)->getAttrOfType<DictionaryAttr>(attr::kTied);
  ASSERT_TRUE(tied);
  ASSERT_EQ(tied.size(), 1u);
  auto tie = tied.getAs<DictionaryAttr>("onnx::MatMul_7");
  ASSERT_TRUE(tie);
  EXPECT_EQ(tie.getAs<StringAttr>("of").getValue(), "w");
  EXPECT_TRUE(tie.get("transposed"));
  // The copy reads `w` transposed.
  int transposes = 0;
  mainOf(*module).walk([&](TransposeOp op) {
    ++transposes;
    EXPECT_EQ(cast<BlockArgument>(op.getInput()).getArgNumber(), 1u);
  });
  EXPECT_EQ(transposes, 1);
}

TEST_F(OnnxImporterTest, DeduplicatedParametersTrainApart) {
  // torch's eval-mode export writes equal parameters once: `b2` is `Identity`
  // of `b1` and starts from its value, but is a parameter of its own.
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) <float[3] b1 = {0.0, 0.0, 0.0}> {
  b2 = Identity(b1)
  t = Add(x, b1)
  y = Add(t, b2)
}
)");
  ASSERT_TRUE(module) << onlyError();
  EXPECT_EQ(paramNames(*module), (Names{"b1", "b2"}));
  func::FuncOp func = mainOf(*module);
  EXPECT_FALSE(func.getArgAttr(1, attr::kInitializer));
  EXPECT_EQ(func.getArgAttrOfType<StringAttr>(2, attr::kInitializer).getValue(),
            "b1");
}

TEST_F(OnnxImporterTest, FreezeAndTrainOverrideTheDefaults) {
  OnnxImportOptions options;
  options.freezePattern = "w|onnx::MatMul_.*";
  options.trainPattern = "onnx::MatMul_11|onnx::Add_5";
  auto module = importExporterNames(kFolded, options);
  ASSERT_TRUE(module) << onlyError();
  // A copy of a frozen parameter is frozen with it; --train wins.
  EXPECT_EQ(paramNames(*module),
            (Names{"u", "onnx::MatMul_11", "onnx::Add_5"}));
  EXPECT_FALSE((*module)->hasAttr(attr::kTied));

  options.trainPattern = "(";
  EXPECT_FALSE(importExporterNames(kFolded, options));
  EXPECT_NE(onlyError().find("--train '(' is not a valid regular expression"),
            std::string::npos);
}

TEST_F(OnnxImporterTest, WhatShapeInferenceAssumesIsCheckedFirst) {
  // Forms ONNX's checker lets through but its shape inference reads out of
  // bounds on: each refused in one line before inference runs.
  auto importModel = [&](const onnx::ModelProto &model) {
    errors.clear();
    return importOnnxFile(&ctx, write("m.onnx", model.SerializeAsString()),
                          OnnxImportOptions());
  };
  onnx::ModelProto model;
  ASSERT_TRUE(onnx::OnnxParser::Parse(model, R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 3] x) => (float[2, 3] y) {
  y = Min(x, x)
})").IsOK());
  onnx::ModelProto empty = model;
  empty.mutable_graph()->mutable_node(0)->set_input(0, "");
  EXPECT_FALSE(importModel(empty));
  EXPECT_NE(onlyError().find("Min at node 'Min_0': its required input 0 is "
                             "not given (an empty name)"),
            std::string::npos);

  onnx::ModelProto cut = model;
  onnx::TensorProto *c = cut.mutable_graph()->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_dims(4);
  c->set_raw_data(std::string(12, '\0')); // 3 floats for 4
  EXPECT_FALSE(importModel(cut));
  EXPECT_NE(onlyError().find("initializer 'c' holds a different number of "
                             "elements than its dims say"),
            std::string::npos);
}

TEST_F(OnnxImporterTest, ComposedOpsRefuseWhatTheyCannotBuild) {
  const std::pair<const char *, const char *> cases[] = {
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x, float[2, 3] t) => (float[2, 3] y) {
  y = Trilu(t)
})",
       "unsupported Trilu of a value computed at run time at node "
       "'Trilu_0'"},
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 5] y) <int64[4] p = {0, 1, 0, 1}> {
  y = Pad<mode = "wrap">(x, p)
})",
       "unsupported Pad mode 'wrap' at node 'Pad_0'"},
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 6] y) <int64[4] p = {0, 3, 0, 0}> {
  y = Pad<mode = "reflect">(x, p)
})",
       "cannot Pad axis 1 of size 3 by 3 and 0 in reflect mode"},
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 0] y) <int64[2] r = {1, 0}> {
  y = Tile(x, r)
})",
       "unsupported Tile repeats [1, 0] of a tensor of shape 2x3"},
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, float[3] lo) => (float[2, 3] y) {
  y = Clip(x, lo)
})",
       "unsupported Clip bound 'lo' of shape 3 at node 'Clip_0': the bounds "
       "must be scalars"},
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, 4, 4, 4] x) => (float[1, 2, 3, 2, 2] y) {
  y = AveragePool<kernel_shape = [2, 2, 2], strides = [2, 2, 2], pads = [1, 0, 0, 1, 0, 0]>(x)
})",
       "unsupported 3-D AveragePool with depth pads [1, 1] or ceil_mode at "
       "node 'AveragePool_0'"},
  };
  for (auto [text, message] : cases) {
    errors.clear();
    EXPECT_FALSE(importText(text)) << text;
    std::string error = onlyError();
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}

TEST_F(OnnxImporterTest, GraphInputThatIsAnInitializerIsAParameter) {
  // Exporters before IR version 4 list every initializer as a graph input.
  auto module = importText(R"(
<ir_version: 3, opset_import: ["" : 9]>
g (float[2, 3] x, float[3] b) => (float[2, 3] y) <float[3] b = {1.0, 2.0, 3.0}> {
  y = Add(x, b)
}
)");
  ASSERT_TRUE(module) << onlyError();
  auto func = mainOf(*module);
  ASSERT_EQ(func.getNumArguments(), 2u);
  EXPECT_EQ(func.getArgAttrOfType<StringAttr>(0, attr::kInput).getValue(), "x");
  EXPECT_EQ(func.getArgAttrOfType<StringAttr>(1, attr::kParam).getValue(), "b");
}

TEST_F(OnnxImporterTest, InputShapesOverrideWinsOverBatchSize) {
  OnnxImportOptions options;
  options.batchSize = 8;
  options.inputShapes["x"] = {3, 4};
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x, float[N, 4] z) => (float[N, 4] y, float[N, 4] w) {
  y = Relu(x)
  w = Relu(z)
}
)",
                           options);
  ASSERT_TRUE(module) << onlyError();
  auto type = mainOf(*module).getFunctionType();
  EXPECT_EQ(type.getInput(0),
            RankedTensorType::get({3, 4}, Float32Type::get(&ctx)));
  EXPECT_EQ(type.getInput(1),
            RankedTensorType::get({8, 4}, Float32Type::get(&ctx)));
}

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

TEST_F(OnnxImporterTest, UnsupportedOpNamesOpOpsetAndNode) {
  EXPECT_FALSE(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
  h = Relu(x)
  y = Hardmax(h)
}
)"));
  EXPECT_EQ(onlyError(), "unsupported ONNX op 'Hardmax' (opset 17) at node "
                         "'Hardmax_1'; run 'loomc --list-ops' for the "
                         "supported set");
}

TEST_F(OnnxImporterTest, LegacyBroadcastOpsetIsUnsupported) {
  EXPECT_FALSE(importText(R"(
<ir_version: 3, opset_import: ["" : 6]>
g (float[2, 3] x, float[2, 3] z) => (float[2, 3] y) {
  y = Add(x, z)
}
)"));
  EXPECT_EQ(onlyError(), "unsupported ONNX op 'Add' (opset 6) at node "
                         "'Add_0'; run 'loomc --list-ops' for the supported "
                         "set");
}

TEST_F(OnnxImporterTest, DynamicDimensionWithoutBatchSize) {
  EXPECT_FALSE(importText(kMlp));
  EXPECT_EQ(onlyError(), "graph input 'x' at node 'Reshape_0' has a dynamic "
                         "shape (dimension 0 is 'N'); set the batch size or "
                         "the input shape");
}

TEST_F(OnnxImporterTest, MalformedTextSaysWhereAndWhat) {
  std::string path =
      write("bad.onnxtext", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
  y = Relu(x
}
)");
  EXPECT_FALSE(importOnnxFile(&ctx, path, {}));
  EXPECT_EQ(onlyError(), "cannot parse '" + path +
                             "' as an ONNX model: expected character ) not "
                             "found at line 4, column 1");
}

TEST_F(OnnxImporterTest, InputShapeWithWrongRank) {
  OnnxImportOptions options;
  options.inputShapes["x"] = {2, 3, 4};
  EXPECT_FALSE(importText(kMlp, options));
  EXPECT_EQ(onlyError(), "input shape for 'x' has rank 3 but the model's "
                         "input has rank 4");
}

TEST_F(OnnxImporterTest, InputShapeForUnknownInput) {
  OnnxImportOptions options;
  options.inputShapes["nope"] = {2};
  std::string path = write("model.onnxtext", kMlp);
  EXPECT_FALSE(importOnnxFile(&ctx, path, options));
  EXPECT_EQ(onlyError(), "cannot set the shape of unknown input 'nope'; the "
                         "graph inputs of '" +
                             path + "' are: x");
}

TEST_F(OnnxImporterTest, IntegerGraphOutputsAreI64) {
  // An int64 input returned as it is, and integers computed in f32 (a
  // comparison cast to int32) converted back.
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2, 3] x, float[2, 3] f) => (int64[2, 3] y, int32[2, 3] z) {
  y = Identity(x)
  zero = Constant<value = float {0.0}>()
  c = Less(f, zero)
  z = Cast<to = 6>(c)
}
)");
  ASSERT_TRUE(module) << onlyError();
  func::FuncOp func = mainOf(*module);
  auto i64 = IntegerType::get(&ctx, 64);
  EXPECT_EQ(cast<RankedTensorType>(func.getResultTypes()[0]).getElementType(), i64);
  EXPECT_EQ(cast<RankedTensorType>(func.getResultTypes()[1]).getElementType(), i64);
  EXPECT_TRUE(llvm::is_contained(opNames(*module), "loom.convert"));

  // Floats cast to integers truncate toward zero.
  errors.clear();
  auto truncated = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] f) => (int64[2, 3] y) {
  y = Cast<to = 7>(f)
}
)");
  ASSERT_TRUE(truncated) << onlyError();
  EXPECT_TRUE(llvm::is_contained(opNames(*truncated), "loom.trunc"));

  // int32 is held in int64 and says so.
  EXPECT_EQ(func.getResultAttrOfType<StringAttr>(1, attr::kOnnxType).getValue(),
            "int32");
  EXPECT_FALSE(func.getResultAttr(0, attr::kOnnxType));
}

TEST_F(OnnxImporterTest, BoundaryTypesAreHeldInF32OrI64) {
  // Bools are 0/1 floats, narrow integers int64, float64 float32; each
  // argument and result says what it is outside.
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool[2, 3] m, uint8[2, 3] u, double[2, 3] d) => (bool[2, 3] y, uint8[2, 3] v, double[2, 3] e) {
  n = Not(m)
  y = And(n, m)
  v = Identity(u)
  e = Neg(d)
}
)");
  ASSERT_TRUE(module) << onlyError();
  func::FuncOp func = mainOf(*module);
  auto f32 = Float32Type::get(&ctx);
  auto i64 = IntegerType::get(&ctx, 64);
  auto elem = [](Type t) { return cast<RankedTensorType>(t).getElementType(); };
  EXPECT_EQ(elem(func.getArgumentTypes()[0]), f32);
  EXPECT_EQ(elem(func.getArgumentTypes()[1]), i64);
  EXPECT_EQ(elem(func.getArgumentTypes()[2]), f32);
  EXPECT_EQ(elem(func.getResultTypes()[0]), f32);
  EXPECT_EQ(elem(func.getResultTypes()[1]), i64);
  EXPECT_EQ(elem(func.getResultTypes()[2]), f32);
  const char *types[] = {"bool", "uint8", "float64"};
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(func.getArgAttrOfType<StringAttr>(i, attr::kOnnxType).getValue(),
              types[i]);
    EXPECT_EQ(
        func.getResultAttrOfType<StringAttr>(i, attr::kOnnxType).getValue(),
        types[i]);
  }
}

TEST_F(OnnxImporterTest, NonNumericGraphValuesAreRejected) {
  EXPECT_FALSE(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (string[2, 3] x) => (float[2, 3] y) {
  y = Cast<to = 1>(x)
}
)"));
  EXPECT_EQ(onlyError(), "graph input 'x' at node 'Cast_0' has element type "
                         "string; only float, bool and integer tensors are "
                         "supported");
}

TEST_F(OnnxImporterTest, BatchedMatMulBecomesBatchMatmul) {
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3, 4] x, float[2, 4, 5] w) => (float[2, 3, 5] y) {
  y = MatMul(x, w)
}
)");
  ASSERT_TRUE(module) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(opNames(*module), (Names{"loom.batch_matmul", "func.return"}));
}

TEST_F(OnnxImporterTest, ScalarMatMulIsUnsupported) {
  EXPECT_FALSE(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float x, float[3, 4] w) => (float[4] y) {
  y = MatMul(x, w)
}
)"));
  ASSERT_FALSE(errors.empty());
}

TEST_F(OnnxImporterTest, EmbeddingLookupTakesInt64Ids) {
  OnnxImportOptions options;
  options.batchSize = 4;
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[N, 3] ids) => (float[N, 3, 2] y)
  <float[5, 2] emb = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0}> {
  y = Gather(emb, ids)
}
)",
                           options);
  ASSERT_TRUE(module) << (errors.empty() ? "" : errors.front());
  auto func = mainOf(*module);
  ASSERT_EQ(func.getNumArguments(), 2u);
  EXPECT_EQ(func.getArgumentTypes()[0],
            RankedTensorType::get({4, 3}, IntegerType::get(&ctx, 64)));
  EXPECT_EQ(opNames(*module), (Names{"loom.gather", "func.return"}));
}

TEST_F(OnnxImporterTest, ConstantSubgraphsFoldToOneConstant) {
  // ConstantOfShape, Trilu, Cast and Where on constants: a causal mask
  // leaves only its constant and the select.
  auto module = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 4] x) => (float[4, 4] y) {
  sh = Constant<value = int64[2] {4, 4}>()
  ones = ConstantOfShape<value = float[1] {1.0}>(sh)
  t = Trilu<upper = 0>(ones)
  c = Cast<to = 9>(t)
  big = Constant<value = float {-1e9}>()
  y = Where(c, x, big)
}
)");
  ASSERT_TRUE(module) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(opNames(*module), (Names{"loom.constant", "loom.constant",
                                     "loom.select", "func.return"}));
  ConstantOp mask;
  mainOf(*module).walk([&](ConstantOp c) {
    if (!mask)
      mask = c;
  });
  ASSERT_TRUE(mask);
  auto values = cast<DenseElementsAttr>(mask.getValue()).getValues<float>();
  SmallVector<float> got(values.begin(), values.end());
  EXPECT_EQ(got, (SmallVector<float>{1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1,
                                     1, 1}));
}

TEST_F(OnnxImporterTest, ReshapeShapeFromAGraphInputIsRejected) {
  EXPECT_FALSE(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 6] x, int64[2] s) => (float[3, 4] y) {
  y = Reshape(x, s)
}
)"));
  EXPECT_EQ(onlyError(), "input 's' of Reshape is computed at run time at "
                         "node 'Reshape_0': it must be a constant (an "
                         "initializer or a Constant node)");
}

TEST_F(OnnxImporterTest, NonBroadcastingOperandsAreReported) {
  EXPECT_FALSE(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, float[4] z) => (float[2, 3] y) {
  y = Add(x, z)
}
)"));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.back().find("do not broadcast"), std::string::npos)
      << errors.back();
}

TEST_F(OnnxImporterTest, NewerOpsetIsRejected) {
  EXPECT_FALSE(importText(R"(
<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 3] x) => (float[2, 3] y) {
  y = Relu(x)
}
)"));
  EXPECT_NE(onlyError().find("uses ONNX opset 18; supported opsets are 1-17"),
            std::string::npos);
}

TEST_F(OnnxImporterTest, MissingFile) {
  EXPECT_FALSE(importOnnxFile(&ctx, (dir + "/absent.onnx").str(), {}));
  EXPECT_EQ(onlyError(), "cannot open '" + std::string(dir) +
                             "/absent.onnx': no such file or directory");
}

TEST_F(OnnxImporterTest, GarbageAndEmptyBinaryFiles) {
  std::string garbage = write("garbage.onnx", "\xff\xff\xff\xff not onnx");
  EXPECT_FALSE(importOnnxFile(&ctx, garbage, {}));
  EXPECT_EQ(onlyError(), "cannot parse '" + garbage +
                             "' as an ONNX model: not a valid protobuf "
                             "message (truncated or not an ONNX file)");
  errors.clear();
  std::string empty = write("empty.onnx", "");
  EXPECT_FALSE(importOnnxFile(&ctx, empty, {}));
  EXPECT_EQ(onlyError(), "cannot parse '" + empty +
                             "' as an ONNX model: no graph or IR version "
                             "(empty or not an ONNX file)");
}

TEST_F(OnnxImporterTest, ListsSupportedOps) {
  std::string ops = listSupportedOnnxOps();
  EXPECT_NE(ops.find("Gemm  1-17\n"), std::string::npos) << ops;
  EXPECT_NE(ops.find("Add  7-17\n"), std::string::npos) << ops;
  EXPECT_NE(ops.find("Reshape  1-17\n"), std::string::npos) << ops;
}

//===----------------------------------------------------------------------===//
// Real binary files (ONNX's node conformance models)
//===----------------------------------------------------------------------===//

class OnnxConformanceTest : public OnnxImporterTest {
protected:
  std::string model(StringRef test) {
    return (Twine(LOOM_ONNX_TESTDATA_DIR) + "/" + test + "/model.onnx").str();
  }
  void SetUp() override {
    OnnxImporterTest::SetUp();
    if (!llvm::sys::fs::is_directory(LOOM_ONNX_TESTDATA_DIR))
      GTEST_SKIP() << "libonnx-testdata is not installed";
  }

  /// Imports node test `test` with the graph inputs `names` turned into
  /// initializers holding the test's first input data set.
  OwningOpRef<ModuleOp>
  importWithConstants(StringRef test, ArrayRef<std::string> names,
                      const OnnxImportOptions &options = {}) {
    onnx::ModelProto proto;
    auto buffer = llvm::MemoryBuffer::getFile(model(test));
    EXPECT_TRUE(buffer) << test.str();
    if (!buffer)
      return nullptr;
    EXPECT_TRUE(proto.ParseFromString((*buffer)->getBuffer().str()));
    onnx::GraphProto &graph = *proto.mutable_graph();
    for (int i = graph.input_size() - 1; i >= 0; --i) {
      if (!llvm::is_contained(names, graph.input(i).name()))
        continue;
      std::string pb = (Twine(LOOM_ONNX_TESTDATA_DIR) + "/" + test +
                        "/test_data_set_0/input_" + Twine(i) + ".pb")
                           .str();
      auto data = llvm::MemoryBuffer::getFile(pb);
      EXPECT_TRUE(data) << pb;
      if (!data)
        return nullptr;
      onnx::TensorProto *init = graph.add_initializer();
      EXPECT_TRUE(init->ParseFromString((*data)->getBuffer().str())) << pb;
      init->set_name(graph.input(i).name());
      graph.mutable_input()->DeleteSubrange(i, 1);
    }
    std::string path = write("model.onnx", "");
    std::string bytes;
    proto.SerializeToString(&bytes);
    write("model.onnx", bytes);
    return importOnnxFile(&ctx, path, options);
  }
};

TEST_F(OnnxConformanceTest, SupportedNodeModelsImport) {
  const char *tests[] = {
      "test_gemm_all_attributes",
      "test_gemm_alpha",
      "test_gemm_beta",
      "test_gemm_default_matrix_bias",
      "test_gemm_default_no_bias",
      "test_gemm_default_scalar_bias",
      "test_gemm_default_single_elem_vector_bias",
      "test_gemm_default_vector_bias",
      "test_gemm_default_zero_bias",
      "test_gemm_transposeA",
      "test_gemm_transposeB",
      "test_matmul_2d",
      "test_relu",
      "test_tanh",
      "test_sigmoid",
      "test_add",
      "test_add_bcast",
      "test_sub",
      "test_sub_bcast",
      "test_mul",
      "test_mul_bcast",
      "test_div",
      "test_div_bcast",
      "test_flatten_axis0",
      "test_flatten_default_axis",
      "test_flatten_negative_axis1",
      "test_identity",
      "test_sin",
      "test_cos",
      "test_max_example",
      "test_min_one_input",
      "test_maxpool_3d_default",
      "test_averagepool_3d_default",
      "test_and2d",
  };
  for (const char *test : tests) {
    errors.clear();
    auto module = importOnnxFile(&ctx, model(test), {});
    EXPECT_TRUE(module) << test << ": "
                        << (errors.empty() ? "" : errors.front());
  }
}

TEST_F(OnnxConformanceTest, TruncatedBinaryIsReported) {
  auto buffer = llvm::MemoryBuffer::getFile(model("test_gemm_all_attributes"));
  ASSERT_TRUE(buffer);
  StringRef bytes = (*buffer)->getBuffer();
  std::string path = write("truncated.onnx", bytes.drop_back(7));
  EXPECT_FALSE(importOnnxFile(&ctx, path, {}));
  EXPECT_NE(onlyError().find("cannot parse '" + path + "' as an ONNX model"),
            std::string::npos);
}

TEST_F(OnnxConformanceTest, BatchedMatMulFilesImport) {
  for (const char *test : {"test_matmul_3d", "test_matmul_4d"}) {
    errors.clear();
    auto module = importOnnxFile(&ctx, model(test), {});
    ASSERT_TRUE(module) << test << ": "
                        << (errors.empty() ? "" : errors.front());
    EXPECT_EQ(opNames(*module), (Names{"loom.batch_matmul", "func.return"}))
        << test;
  }
}

TEST_F(OnnxConformanceTest, TransformerAndConvNodeModelsImport) {
  const char *tests[] = {
      "test_softmax_axis_0",
      "test_softmax_axis_1",
      "test_softmax_axis_2",
      "test_softmax_default_axis",
      "test_softmax_example",
      "test_softmax_large_number",
      "test_softmax_negative_axis",
      "test_softmax_axis_1_expanded",
      "test_layer_normalization_2d_axis0_expanded",
      "test_layer_normalization_4d_axis_negative_1_expanded",
      "test_transpose_default",
      "test_transpose_all_permutations_0",
      "test_transpose_all_permutations_5",
      "test_gather_0",
      "test_gather_1",
      "test_gather_2d_indices",
      "test_gather_negative_indices",
      "test_concat_1d_axis_0",
      "test_concat_2d_axis_negative_1",
      "test_concat_3d_axis_1",
      "test_split_equal_parts_1d",
      "test_split_equal_parts_2d",
      "test_split_equal_parts_default_axis",
      "test_basic_conv_with_padding",
      "test_basic_conv_without_padding",
      "test_conv_with_strides_padding",
      "test_conv_with_strides_no_padding",
      "test_conv_with_strides_and_asymmetric_padding",
      "test_maxpool_2d_default",
      "test_maxpool_2d_pads",
      "test_maxpool_2d_strides",
      "test_maxpool_2d_precomputed_pads",
      "test_maxpool_2d_precomputed_strides",
      "test_globalaveragepool",
      "test_globalaveragepool_precomputed",
      "test_reduce_mean_default_axes_keepdims_example",
      "test_reduce_mean_do_not_keepdims_random",
      "test_reduce_mean_negative_axes_keepdims_example",
      "test_reduce_max_keepdims_random",
      "test_erf",
      "test_pow",
      "test_pow_bcast_array",
      "test_exp",
      "test_log",
      "test_sqrt",
      "test_neg",
      "test_reciprocal",
      "test_max_two_inputs",
      "test_min_two_inputs",
      "test_dropout_default",
      "test_dropout_default_ratio",
      "test_constant",
      "test_unsqueeze_axis_3",
  };
  for (const char *test : tests) {
    errors.clear();
    auto module = importOnnxFile(&ctx, model(test), {});
    EXPECT_TRUE(module) << test << ": "
                        << (errors.empty() ? "" : errors.front());
  }
}

TEST_F(OnnxConformanceTest, NodeVariantsExpressedWithOtherOpsImport) {
  // Outputs and attributes that no single loom op has, built from others.
  struct Case {
    const char *test;
    const char *op; // A loom op the import must contain.
  };
  const Case cases[] = {
      // Mean / InvStdDev outputs: reductions and rsqrt.
      {"test_layer_normalization_2d_axis0", "loom.rsqrt"},
      {"test_layer_normalization_4d_axis_negative_2", "loom.reduce_mean"},
      {"test_layer_normalization_3d_axis1_epsilon", "loom.rsqrt"},
      // Running statistics that are graph inputs; updated running statistics.
      {"test_batchnorm_example", "loom.rsqrt"},
      {"test_batchnorm_epsilon", "loom.rsqrt"},
      {"test_batchnorm_example_training_mode", "loom.scale"},
      {"test_batchnorm_epsilon_training_mode", "loom.batch_norm"},
      // SAME padding, ceil_mode, 1-D windows: pads and reshapes.
      {"test_maxpool_2d_ceil", "loom.max_pool2d"},
      {"test_maxpool_2d_same_upper", "loom.max_pool2d"},
      {"test_maxpool_2d_same_lower", "loom.max_pool2d"},
      {"test_maxpool_2d_precomputed_same_upper", "loom.max_pool2d"},
      {"test_maxpool_1d_default", "loom.reshape"},
      {"test_conv_with_autopad_same", "loom.conv2d"},
  };
  for (const Case &c : cases) {
    errors.clear();
    auto module = importOnnxFile(&ctx, model(c.test), {});
    ASSERT_TRUE(module) << c.test << ": "
                        << (errors.empty() ? "" : errors.front());
    EXPECT_TRUE(llvm::is_contained(opNames(*module), c.op))
        << c.test << " has no " << c.op;
  }
}

TEST_F(OnnxConformanceTest, NodeModelsWithConstantOperandsImport) {
  // These tests pass shapes, axes, indices and conditions as graph inputs;
  // Loom needs them constant, so their test data becomes initializers.
  struct Case {
    const char *test;
    std::vector<std::string> constants;
    const char *op; // A loom op the import must contain ("" for none).
  };
  const Case cases[] = {
      {"test_slice", {"starts", "ends", "axes", "steps"}, "loom.slice"},
      {"test_slice_default_axes", {"starts", "ends"}, "loom.slice"},
      {"test_slice_default_steps", {"starts", "ends", "axes"}, "loom.slice"},
      {"test_slice_end_out_of_bounds",
       {"starts", "ends", "axes", "steps"},
       "loom.slice"},
      {"test_slice_neg", {"starts", "ends", "axes", "steps"}, "loom.slice"},
      {"test_slice_negative_axes", {"starts", "ends", "axes"}, "loom.slice"},
      {"test_slice_start_out_of_bounds",
       {"starts", "ends", "axes", "steps"},
       ""},
      {"test_unsqueeze_axis_0", {"axes"}, "loom.reshape"},
      {"test_unsqueeze_negative_axes", {"axes"}, "loom.reshape"},
      {"test_unsqueeze_unsorted_axes", {"axes"}, "loom.reshape"},
      {"test_squeeze", {"axes"}, "loom.reshape"},
      {"test_squeeze_negative_axes", {"axes"}, "loom.reshape"},
      {"test_expand_dim_changed", {"new_shape"}, "loom.expand"},
      {"test_expand_dim_unchanged", {"new_shape"}, "loom.expand"},
      {"test_where_example", {"condition"}, "loom.select"},
      {"test_reduce_sum_keepdims_random", {"axes"}, "loom.reduce_sum"},
      {"test_reduce_sum_negative_axes_keepdims_example",
       {"axes"},
       "loom.reduce_sum"},
      {"test_reduce_sum_default_axes_keepdims_example",
       {"axes"},
       "loom.reduce_sum"},
      {"test_reshape_negative_dim", {"shape"}, "loom.reshape"},
      {"test_reshape_reordered_all_dims", {"shape"}, "loom.reshape"},
      {"test_split_variable_parts_2d", {"split"}, "loom.slice"},
      {"test_batchnorm_example", {"mean", "var"}, "loom.sub"},
      {"test_batchnorm_epsilon", {"mean", "var"}, "loom.sub"},
      {"test_slice_neg_steps",
       {"starts", "ends", "axes", "steps"},
       "loom.gather"},
      {"test_pow_types_float32_int64", {"y"}, "loom.pow"},
      {"test_maxpool_2d_dilations", {}, "loom.max"},
  };
  for (const Case &c : cases) {
    errors.clear();
    auto module = importWithConstants(c.test, c.constants);
    ASSERT_TRUE(module) << c.test << ": "
                        << (errors.empty() ? "" : errors.front());
    if (*c.op)
      EXPECT_TRUE(llvm::is_contained(opNames(*module), c.op))
          << c.test << " has no " << c.op;
  }
}

TEST_F(OnnxConformanceTest, UnsupportedNodeVariantsAreDiagnosed) {
  const std::pair<const char *, const char *> cases[] = {
      {"test_training_dropout", "unsupported Dropout with a training_mode "
                                "computed at run time"},
      {"test_maxpool_with_argmax_2d_precomputed_pads",
       "loom.max_pool2d has no Indices output"},
      {"test_cast_FLOAT_to_STRING", "unsupported Cast from float32 to "
                                    "string"},
  };
  for (auto [test, message] : cases) {
    errors.clear();
    EXPECT_FALSE(importOnnxFile(&ctx, model(test), {})) << test;
    ASSERT_EQ(errors.size(), 1u) << test;
    EXPECT_NE(errors.front().find(message), std::string::npos)
        << test << ": " << errors.front();
  }
  errors.clear();
  // Scalar float initializers are constants and fold; one trained as a
  // parameter does not.
  EXPECT_TRUE(importWithConstants("test_range_float_type_positive_delta",
                                  {"start", "limit", "delta"}));
  OnnxImportOptions train;
  train.trainPattern = "start";
  EXPECT_FALSE(importWithConstants("test_range_float_type_positive_delta",
                                   {"start", "limit", "delta"}, train));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors.front().find("input 'start' is a float32 initializer "
                                "trained as a parameter"),
            std::string::npos)
      << errors.front();
}

} // namespace
