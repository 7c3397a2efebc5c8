//===- PlanTest.cpp - Plan loading and validation ---------------------------===//

#include "TestPlans.h"
#include "runtime/Plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <unistd.h>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

plan::Plan validPlan() {
  return makeLinearRegressionPlan(2, 4, 3, 2, 0.1, std::vector<float>(6, 0.5f));
}

/// Validates `validPlan()` after `mutate` and returns the error message.
std::string errorAfter(const std::function<void(plan::Plan &)> &mutate) {
  plan::Plan p = validPlan();
  mutate(p);
  Status s = validatePlan(p, "p.loomplan");
  EXPECT_FALSE(s.isOk()) << "mutation was accepted";
  if (!s.isOk()) {
    EXPECT_EQ(s.message().rfind("p.loomplan: ", 0), 0u) << s.message();
  }
  return s.message();
}

plan::Program &prog0(plan::Plan &p) { return *p.mutable_programs(0); }

#define EXPECT_ERROR(mutation, text)                                           \
  do {                                                                         \
    std::string msg = errorAfter(mutation);                                    \
    EXPECT_NE(msg.find(text), std::string::npos) << msg;                       \
  } while (false)

TEST(PlanTest, ValidPlanPasses) {
  Status s = validatePlan(validPlan(), "p");
  EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(PlanTest, SaveAndLoadRoundTrip) {
  std::string path = ::testing::TempDir() + "/plan_rt_" +
                     std::to_string(getpid()) + ".loomplan";
  ASSERT_TRUE(savePlan(validPlan(), path).isOk());
  StatusOr<plan::Plan> p = loadPlan(path);
  ASSERT_TRUE(p.isOk()) << p.status().message();
  EXPECT_EQ(p->world_size(), 2);
  EXPECT_EQ(p->programs_size(), 2);
}

TEST(PlanTest, ChecksumCatchesAChangedFile) {
  std::string path = ::testing::TempDir() + "/plan_sum_" +
                     std::to_string(getpid()) + ".loomplan";
  plan::Plan valid = validPlan();
  ASSERT_TRUE(savePlan(valid, path).isOk());
  StatusOr<plan::Plan> saved = loadPlan(path);
  ASSERT_TRUE(saved.isOk()) << saved.status().message();
  EXPECT_EQ(saved->checksum().rfind("fnv1a64:", 0), 0u);
  EXPECT_EQ(saved->checksum(), *planChecksum(valid));

  // One character of a buffer name changed, the length kept: the file
  // still parses and validates, and only the checksum tells.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t at = bytes.find(valid.programs(0).buffers(0).name());
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 1;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  StatusOr<plan::Plan> changed = loadPlan(path);
  ASSERT_FALSE(changed.isOk());
  EXPECT_NE(changed.status().message().find(
                "does not match its contents (fnv1a64:"),
            std::string::npos)
      << changed.status().message();

  // A plan edited on purpose runs with its checksum cleared.
  plan::Plan edited = valid;
  edited.mutable_programs(0)->mutable_buffers(0)->set_name("renamed");
  std::string raw;
  ASSERT_TRUE(edited.SerializeToString(&raw));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << raw;
  EXPECT_TRUE(loadPlan(path).isOk());
  std::remove(path.c_str());
}

TEST(PlanTest, LoadErrors) {
  StatusOr<plan::Plan> missing = loadPlan("/nonexistent/x.loomplan");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().message().find("cannot open plan"),
            std::string::npos);
  std::string path = ::testing::TempDir() + "/plan_bad_" +
                     std::to_string(getpid()) + ".loomplan";
  std::ofstream(path) << "\xff\xff\xff garbage";
  StatusOr<plan::Plan> bad = loadPlan(path);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("not a valid .loomplan"),
            std::string::npos);
}

TEST(PlanTest, FormatVersion) {
  EXPECT_ERROR([](plan::Plan &p) { p.set_format_version(2); },
               "format_version 2 is not supported");
}

// A plan whose instructions were reordered, cut or emptied computes garbage
// (a loss of -0.68, a loss of 0): refused at the first place it breaks.
TEST(PlanTest, InstructionsRunInOrder) {
  EXPECT_ERROR(
      [](plan::Plan &p) {
        auto *insts = prog0(p).mutable_instructions();
        std::reverse(insts->begin(), insts->end());
      },
      "instruction 0 'sgd' at 'sgd_W' reads TEMPORARY buffer 7 'dW' before any "
      "instruction writes it");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).clear_instructions(); },
               "a training program without instructions");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions()->DeleteSubrange(0, 1); },
               "instruction 0 'mse' at 'loss' reads TEMPORARY buffer 3 'y'");
}

TEST(PlanTest, NothingIsWrittenOverWhatKeepsItsValue) {
  // A temporary placed over the parameter it is computed from.
  EXPECT_ERROR(
      [](plan::Plan &p) {
        buffer(prog0(p), 3).set_offset(buffer(prog0(p), 2).offset());
      },
      "instruction 0 'matmul' at 'linear' writes TEMPORARY buffer 3 'y' "
      "(arena bytes [");
  // The gradient placed over it: the update would read its own gradient.
  EXPECT_ERROR(
      [](plan::Plan &p) {
        buffer(prog0(p), 7).set_offset(buffer(prog0(p), 2).offset());
      },
      "instruction 5 'matmul' at 'linear_grad' writes TEMPORARY buffer 7 'dW' "
      "(arena bytes [128, 152)) over PARAMETER buffer 2 'W' ([128, 152))");
  // Two buffers that each keep their value, in the same bytes.
  EXPECT_ERROR(
      [](plan::Plan &p) {
        int32_t c = addBuffer(prog0(p), "c", plan::CONSTANT, {32});
        buffer(prog0(p), c).set_offset(buffer(prog0(p), 2).offset() - 64);
        setData(buffer(prog0(p), c), std::vector<float>(32, 1.0f));
      },
      "CONSTANT buffer 8 'c' and PARAMETER buffer 2 'W' share arena bytes "
      "[128, 152)");
  // The in-place update writes the parameter itself: allowed (validPlan).
}

TEST(PlanTest, SettingsAreKnown) {
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_mesh(0)->set_name("dq"); },
               "mesh axis 'dq' is unknown; a plan's mesh axes are pp, dp and tp");
  EXPECT_ERROR(
      [](plan::Plan &p) {
        p.mutable_mesh(0)->set_name("tp");
        plan::MeshAxis *dp = p.add_mesh();
        dp->set_name("dp");
        dp->set_size(1);
      },
      "mesh axis 'dp' is repeated or out of order");
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_training()->set_optimizer("lamb"); },
               "training.optimizer 'lamb' is not adamw or sgd");
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_training()->set_precision("fp8"); },
               "training.precision 'fp8' is not fp32 or bf16");
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_training()->set_loss("hinge"); },
               "training.loss 'hinge' is not cross_entropy, mse or output:NAME");
}

// The data buffers must hold each data-parallel rank's whole share: a global
// batch that disagrees with them would train on some samples twice and skip
// others.
TEST(PlanTest, DataBuffersCoverTheShare) {
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_training()->set_global_batch(8); },
               "the data buffers of 'target' hold 2 samples, not a data-parallel rank's "
               "share of 4 (global batch 8 / dp = 2)");
  EXPECT_ERROR(
      [](plan::Plan &p) {
        p.mutable_training()->set_global_batch(8);
        prog0(p).mutable_buffers(0)->set_sample_offset(2);
        prog0(p).mutable_buffers(1)->set_sample_offset(2);
      },
      "the data buffers of 'target' skip samples [0, 2)");
}

TEST(PlanTest, MeshMustMatchWorldSize) {
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_mesh(0)->set_size(3); },
               "has 3 ranks but world_size is 2");
}

TEST(PlanTest, EveryRankInExactlyOneProgram) {
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_programs(1)->set_ranks(0, 0); },
               "rank 0 appears in programs 0 and 1");
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_programs(1)->clear_ranks(); },
               "rank 1 is in no program");
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_programs(1)->set_ranks(0, 5); },
               "lists rank 5 outside [0, 2)");
}

TEST(PlanTest, BuffersInsideTheArena) {
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).set_arena_bytes(64); },
               "outside the arena of 64 bytes");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_buffers(1)->set_offset(65); },
               "offset 65 is not a non-negative multiple of 64");
  // An offset near 2^63 must not wrap around the bounds check.
  EXPECT_ERROR(
      [](plan::Plan &p) {
        prog0(p).mutable_buffers(1)->set_offset(9223372036854775744LL);
      },
      "lie outside the arena");
}

TEST(PlanTest, HugeShapesDoNotOverflow) {
  EXPECT_ERROR(
      [](plan::Plan &p) {
        plan::Buffer *b = prog0(p).mutable_buffers(0);
        b->clear_shape();
        b->add_shape(int64_t(1) << 40);
        b->add_shape(int64_t(1) << 40);
      },
      "is too large");
}

TEST(PlanTest, SizeMatchesShapeAndDType) {
  EXPECT_ERROR(
      [](plan::Plan &p) { prog0(p).mutable_buffers(0)->set_size_bytes(4); },
      "size_bytes 4 does not match shape [2, 3] of f32 (24 bytes)");
  EXPECT_ERROR(
      [](plan::Plan &p) {
        prog0(p).mutable_buffers(0)->set_dtype(plan::DType(7));
      },
      "dtype unspecified is not supported (f32, bf16 and i64 are)");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_buffers(1)->set_id(0); },
               "duplicate buffer id");
}

TEST(PlanTest, BoundaryTypes) {
  // A graph input or output held in f32 (bools, floats) or i64 (integers)
  // may say its outside type; nothing else may.
  plan::Plan p = validPlan();
  ASSERT_EQ(prog0(p).buffers(0).role(), plan::INPUT);
  prog0(p).mutable_buffers(0)->set_io_type(plan::IO_F64);
  Status s = validatePlan(p, "p");
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_ERROR(
      [](plan::Plan &p) {
        prog0(p).mutable_buffers(0)->set_io_type(plan::IO_U8);
      },
      "io_type 3 belongs on an INPUT or OUTPUT buffer of dtype i64");
  EXPECT_ERROR(
      [](plan::Plan &p) {
        prog0(p).mutable_buffers(2)->set_io_type(plan::IO_BOOL);
      },
      "io_type 1 belongs on an INPUT or OUTPUT buffer of dtype f32");
}

TEST(PlanTest, InitialValues) {
  // A parameter without a stored value is filled by its init rule.
  EXPECT_ERROR(
      [](plan::Plan &p) {
        plan::Buffer *b = prog0(p).mutable_buffers(2);
        b->clear_data();
        b->mutable_init_rule()->set_std(-1);
      },
      "init_rule NORMAL has a bad std -1");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_buffers(2)->set_data("abc"); },
               "init data has 3 bytes, expected 24");
  EXPECT_ERROR(
      [](plan::Plan &p) { prog0(p).mutable_buffers(2)->set_onnx_initializer("W"); },
      "has no model_path");
}

TEST(PlanTest, DataBuffers) {
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_buffers(0)->clear_binding(); },
               "INPUT buffer has no binding");
  EXPECT_ERROR(
      [](plan::Plan &p) { prog0(p).mutable_buffers(0)->set_sample_offset(3); },
      "samples [3, +2) exceed a data-parallel rank's share of 2 samples "
      "(global batch 4 / dp = 2)");
  // A micro-batch's offset inside the share is checked without overflow.
  EXPECT_ERROR(
      [](plan::Plan &p) {
        prog0(p).mutable_buffers(0)->set_sample_offset(INT64_MAX);
      },
      "exceed a data-parallel rank's share of 2 samples");
  EXPECT_ERROR([](plan::Plan &p) { p.mutable_training()->set_global_batch(5); },
               "the global batch of 5 does not split over dp = 2");
}

TEST(PlanTest, LossBuffer) {
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).set_loss_buffer(-1); },
               "loss_buffer -1 does not exist");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).set_loss_buffer(4); },
               "loss_buffer 4 does not have role LOSS");
}

TEST(PlanTest, InstructionErrorsNameTheLocation) {
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(0)->set_op("conv"); },
               "instruction 0 'conv' at 'linear': unknown op (this runtime knows: "
               "matmul, add");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(0)->set_inputs(1, 99); },
               "instruction 0 'matmul' at 'linear': input buffer 99 does not exist");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(0)->add_inputs(2); },
               "expects 2 input(s), got 3");
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(1)->clear_outputs(); },
               "'mse' at 'loss': expects 1 output(s), got 0");
}

TEST(PlanTest, LongNamesAreCutInErrors) {
  plan::Plan p = validPlan();
  prog0(p).mutable_instructions(0)->set_op("conv");
  prog0(p).mutable_instructions(0)->set_loc(std::string(1 << 20, 'x'));
  Status s = validatePlan(p, "p.loomplan");
  ASSERT_FALSE(s.isOk());
  EXPECT_LE(s.message().size(), Status::kMaxMessageBytes + 64);
  EXPECT_EQ(s.message().rfind("p.loomplan: program 0: instruction 0 'conv' at 'xxx", 0), 0u)
      << s.message().substr(0, 80);
  EXPECT_NE(s.message().find(" bytes cut ...] "), std::string::npos);
}

TEST(PlanTest, OperandDTypesAndShapes) {
  // matmul x[2,3] . target[2,2]: inner dims differ.
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(0)->set_inputs(1, 1); },
               "inner dimensions differ: op(a) is 2x3, op(b) is 2x2");
  // mse of y[2,2] against x[2,3].
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(1)->set_inputs(1, 0); },
               "differ in element count");
  // cross_entropy needs an i64 target.
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(1)->set_op("cross_entropy"); },
               "target is f32, expected i64");
  // matmul output of the wrong size.
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(0)->set_outputs(0, 7); },
               "output [3, 2] has 6 elements, expected 2x2");
}

TEST(PlanTest, InPlaceOnlyWhereAllowed) {
  EXPECT_ERROR([](plan::Plan &p) {
    plan::Instruction *i = prog0(p).mutable_instructions(4); // mse_grad -> dy
    i->set_outputs(0, i->inputs(0));
  }, "cannot run in place");
  EXPECT_ERROR([](plan::Plan &p) {
    prog0(p).mutable_instructions(8)->set_outputs(0, 7); // sgd must write W
  }, "output 0 must be input 0");
  EXPECT_ERROR([](plan::Plan &p) {
    prog0(p).mutable_instructions(0)->set_outputs(0, 0); // matmul writes x
  }, "writes INPUT buffer 0 'x'");
}

TEST(PlanTest, Attributes) {
  EXPECT_ERROR([](plan::Plan &p) { prog0(p).mutable_instructions(8)->mutable_attrs()->erase("lr"); },
               "missing attribute 'lr'");
  EXPECT_ERROR([](plan::Plan &p) {
    (*prog0(p).mutable_instructions(3)->mutable_attrs())["factor"].set_s("x");
  }, "attribute 'factor' must be a number");
  EXPECT_ERROR([](plan::Plan &p) {
    (*prog0(p).mutable_instructions(2)->mutable_attrs())["axes"]
        .mutable_ints()->set_values(0, 1);
  }, "mesh axis 1 does not exist");
  EXPECT_ERROR([](plan::Plan &p) {
    (*prog0(p).mutable_instructions(2)->mutable_attrs())["reduction"].set_s("max");
  }, "reduction 'max' is not supported");
  EXPECT_ERROR([](plan::Plan &p) {
    (*prog0(p).mutable_instructions(8)->mutable_attrs())["momentum"].set_f(0.9);
  }, "momentum buffer must be present");
}

TEST(PlanTest, HelpersDescribeTheMesh) {
  plan::Plan p = validPlan();
  EXPECT_EQ(meshToString(p), "dp=2");
  EXPECT_EQ(findProgramIndex(p, 1), 1);
  EXPECT_EQ(findProgramIndex(p, 2), -1);
  EXPECT_EQ(meshSizes(p), std::vector<int64_t>{2});
}

} // namespace

TEST(PlanTest, MeshCoordinatesAreRowMajor) {
  plan::Plan p;
  for (auto [name, size] : {std::pair<const char *, int>{"pp", 2}, {"dp", 3}, {"tp", 2}}) {
    plan::MeshAxis *a = p.add_mesh();
    a->set_name(name);
    a->set_size(size);
  }
  // rank = (pp * 3 + dp) * 2 + tp, Megatron's order.
  EXPECT_EQ(meshCoordinate(p, 0, "dp"), 0);
  EXPECT_EQ(meshCoordinate(p, 1, "tp"), 1);
  EXPECT_EQ(meshCoordinate(p, 2, "dp"), 1);
  EXPECT_EQ(meshCoordinate(p, 5, "dp"), 2);
  EXPECT_EQ(meshCoordinate(p, 6, "pp"), 1);
  EXPECT_EQ(meshCoordinate(p, 11, "dp"), 2);
  EXPECT_EQ(meshCoordinate(p, 11, "zz"), 0);
  EXPECT_EQ(meshAxisSize(p, "dp"), 3);
  EXPECT_EQ(meshAxisSize(p, "zz"), 1);
}

TEST(PlanTest, ForwardPlansTakeScalarInputs) {
  // A forward pass takes whole values: a scalar input is valid there, and
  // must not be treated as a batch of samples.
  plan::Plan p = makePlan(1, /*training=*/false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t c = addBuffer(prog, "c", plan::INPUT, {});
  buffer(prog, c).set_binding("c");
  int32_t y = addBuffer(prog, "y", plan::OUTPUT, {});
  buffer(prog, y).set_binding("y");
  setF(addInst(prog, "scale", {c}, {y}, "s"), "factor", 2.0);
  Status s = validatePlan(p, "f.loomplan");
  EXPECT_TRUE(s.isOk()) << s.message();
}
