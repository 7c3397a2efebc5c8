//===- OpTableTest.cpp - The op table against the kernel registry ---------===//
//
// The op table (runtime/OpTable.h) is the one list of ops and operand counts;
// the CPU registry binds exactly its ops. Format validation
// (`validatePlanFormat`, what `loomc` runs) rejects unknown ops and wrong
// operand counts by the table alone; the runtime's `validatePlan` adds the
// kernels' own rules.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpTable.h"
#include "TestPlans.h"
#include "runtime/Plan.h"
#include "runtime/PlanFormat.h"
#include "runtime/kernels/Kernel.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

plan::Plan validPlan() {
  return makeLinearRegressionPlan(2, 4, 3, 2, 0.1, std::vector<float>(6, 0.5f));
}

plan::Instruction &inst0(plan::Plan &p) {
  return *p.mutable_programs(0)->mutable_instructions(0);
}

TEST(OpTableTest, NamesAreUniqueAndCountsOrdered) {
  std::set<std::string_view> seen;
  for (const OpInfo &op : opTable()) {
    EXPECT_TRUE(seen.insert(op.name).second) << "duplicate op " << op.name;
    EXPECT_GE(op.minInputs, 0) << op.name;
    EXPECT_LE(op.minInputs, op.maxInputs) << op.name;
    // Every op writes a buffer but `send`, whose effect is the transfer.
    EXPECT_GE(op.minOutputs, op.name == "send" ? 0 : 1) << op.name;
    EXPECT_LE(op.minOutputs, op.maxOutputs) << op.name;
    EXPECT_EQ(findOp(op.name), &op) << op.name;
  }
  EXPECT_EQ(findOp("conv"), nullptr);
}

TEST(OpTableTest, CpuRegistryBindsExactlyTheTablesOps) {
  for (const OpInfo &op : opTable())
    EXPECT_NE(findKernel(op.name), nullptr)
        << "op '" << op.name << "' has no CPU kernel";
  std::vector<std::string_view> names = cpuKernelNames();
  for (std::string_view name : names)
    EXPECT_NE(findOp(name), nullptr)
        << "the CPU registry binds '" << name << "', which the table lacks";
  EXPECT_EQ(names.size(), opTable().size());
}

TEST(OpTableTest, KnownOpNamesListsTheTableInOrder) {
  std::string expected;
  for (const OpInfo &op : opTable())
    expected += (expected.empty() ? "" : ", ") + std::string(op.name);
  EXPECT_EQ(knownOpNames(), expected);
  EXPECT_EQ(knownOpNames().rfind("matmul, add, ", 0), 0u) << knownOpNames();
}

TEST(OpTableTest, FormatValidationRejectsAnUnknownOp) {
  plan::Plan p = validPlan();
  inst0(p).set_op("conv");
  for (const Status &s :
       {validatePlanFormat(p, "p.loomplan"), validatePlan(p, "p.loomplan")}) {
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.message().rfind("p.loomplan: program 0: instruction 0 'conv' "
                                "at 'linear': unknown op (this runtime knows: "
                                "matmul, add, ",
                                0),
              0u)
        << s.message();
  }
}

TEST(OpTableTest, FormatValidationChecksTheTablesCounts) {
  plan::Plan p = validPlan();
  inst0(p).add_inputs(2);
  Status s = validatePlanFormat(p, "p");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'matmul' at 'linear': expects 2 input(s), got 3"),
            std::string::npos)
      << s.message();

  plan::Plan q = validPlan();
  q.mutable_programs(0)->mutable_instructions(1)->clear_outputs();
  s = validatePlanFormat(q, "p");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'mse' at 'loss': expects 1 output(s), got 0"),
            std::string::npos)
      << s.message();
}

TEST(OpTableTest, KernelRulesComeOnTopOfTheFormat) {
  // matmul x[2,3] . target[2,2]: the counts are right, the shapes are not;
  // only the kernels know.
  plan::Plan p = validPlan();
  inst0(p).set_inputs(1, 1);
  Status format = validatePlanFormat(p, "p");
  EXPECT_TRUE(format.isOk()) << format.message();
  Status full = validatePlan(p, "p");
  ASSERT_FALSE(full.isOk());
  EXPECT_NE(full.message().find("inner dimensions differ"), std::string::npos)
      << full.message();
}

TEST(OpTableTest, VerifierSeesEveryInstructionResolved) {
  plan::Plan p = validPlan();
  int calls = 0;
  Status s = validatePlanFormat(p, "p", [&](const OpView &view) {
    ++calls;
    EXPECT_NE(findOp(view.inst.op()), nullptr);
    EXPECT_EQ(view.inputs.size(), size_t(view.inst.inputs_size()));
    EXPECT_EQ(view.outputs.size(), size_t(view.inst.outputs_size()));
    return view.inst.op() == "mse" ? makeError("no mse here") : Status::ok();
  });
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("instruction 1 'mse' at 'loss': no mse here"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(calls, 2);
}

} // namespace
