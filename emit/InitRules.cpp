//===- InitRules.cpp - How each parameter is initialised --------*- C++ -*-===//
//
// The rules follow what GPT-2, BERT and LLaMA do in their `_init_weights`:
// normalisation scales start at one, biases at zero, and weight matrices and
// embeddings are drawn from N(0, 0.02^2). A parameter's role is read from
// the ops that use it; the backward and optimizer ops that also use it agree
// with the forward ones or say nothing.
//
//===----------------------------------------------------------------------===//

#include "emit/InitRules.h"
#include "ir/LoomOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::loom;
namespace plan = ::loom::plan;

namespace {
enum class Role { None, Scale, Bias };
} // namespace

/// What `use` makes of the value it reads.
static Role roleOf(OpOperand &use) {
  Operation *op = use.getOwner();
  unsigned i = use.getOperandNumber();
  return llvm::TypeSwitch<Operation *, Role>(op)
      .Case<LayerNormOp, BatchNormOp>([&](auto) {
        return i == 1 ? Role::Scale : i == 2 ? Role::Bias : Role::None;
      })
      .Case<RmsNormOp>([&](auto) { return i == 1 ? Role::Scale : Role::None; })
      .Case<LayerNormGradOp, RmsNormGradOp, BatchNormGradOp>(
          [&](auto) { return i == 2 ? Role::Scale : Role::None; })
      .Case<LinearOp>([&](auto) { return i == 2 ? Role::Bias : Role::None; })
      .Default([](Operation *) { return Role::None; });
}

/// Collects the roles of `value`'s uses, looking through `loom.convert`
/// (under `--precision bf16` a parameter reaches its ops as a bf16 copy)
/// and through the slices and reshapes that take a block of a fused
/// parameter (loom-split-fused-projections), and through the collectives
/// that gather a sharded parameter before its use (a layer norm's scale
/// split over tp reaches the norm through an all-gather, alone or in a
/// bucket: its result of the bucket's wait).
static void collectRoles(Value value, bool &scale, bool &bias) {
  for (OpOperand &use : value.getUses()) {
    Operation *owner = use.getOwner();
    if (isa<ConvertOp, SliceOp, ReshapeOp>(owner) ||
        (isa<shard::ShardDialect>(owner->getDialect()) &&
         owner->getNumResults() == 1)) {
      collectRoles(use.getOwner()->getResult(0), scale, bias);
      continue;
    }
    if (isa<AllGatherStartOp>(owner)) {
      Value inFlight = owner->getResult(use.getOperandNumber());
      for (Operation *wait : inFlight.getUsers())
        collectRoles(wait->getResult(use.getOperandNumber()), scale, bias);
      continue;
    }
    Role role = roleOf(use);
    scale |= role == Role::Scale;
    bias |= role == Role::Bias;
  }
}

plan::InitRule mlir::loom::chooseInitRule(Value param) {
  bool scale = false, bias = false;
  collectRoles(param, scale, bias);
  plan::InitRule rule;
  auto type = dyn_cast<RankedTensorType>(param.getType());
  if (scale)
    rule.set_kind(plan::InitRule::ONES);
  else if (bias || (type && type.getRank() <= 1))
    rule.set_kind(plan::InitRule::ZEROS);
  else
    rule.set_std(kInitStd); // NORMAL
  return rule;
}
