//===- RunForward.h - Run a forward module on the CPU runtime ---*- C++ -*-===//
//
// For numerical checks of compiler rewrites: emit a module's plan and run
// it once on one rank, the same way for the rewritten and the reference IR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_COMPILER_RUNFORWARD_H
#define LOOM_TEST_UNIT_COMPILER_RUNFORWARD_H

#include "emit/PlanEmitter.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"

#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace loom::test {

/// Every output of one run of `module`'s forward plan on `inputs` (by
/// binding), or nothing after a test failure.
inline std::map<std::string, runtime::HostTensor>
runForward(mlir::ModuleOp module,
           const std::map<std::string, runtime::HostTensor> &inputs) {
  mlir::FailureOr<plan::Plan> plan =
      mlir::loom::emitPlan(module, mlir::loom::EmitOptions());
  EXPECT_TRUE(mlir::succeeded(plan));
  if (mlir::failed(plan))
    return {};
  runtime::LocalCommunicator world;
  auto session = runtime::Session::create(*plan, world);
  EXPECT_TRUE(session.isOk()) << session.status().message();
  if (!session.isOk())
    return {};
  for (const auto &[binding, tensor] : inputs) {
    runtime::Status st = (*session)->setInput(binding, tensor);
    EXPECT_TRUE(st.isOk()) << st.message();
  }
  runtime::Status st = (*session)->runStep(0);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk())
    return {};
  return (*session)->outputs();
}

} // namespace loom::test

#endif // LOOM_TEST_UNIT_COMPILER_RUNFORWARD_H
