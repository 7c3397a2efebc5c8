//===- Options.cpp - The choices the pipelines take -------------*- C++ -*-===//

#include "passes/Options.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir::loom;

llvm::StringRef mlir::loom::stringifyLoss(LossKind kind) {
  switch (kind) {
  case LossKind::CrossEntropy:
    return "cross_entropy";
  case LossKind::Mse:
    return "mse";
  case LossKind::Output:
    return "output";
  }
  llvm_unreachable("unknown loss");
}

llvm::StringRef mlir::loom::stringifyOptimizer(OptimizerKind kind) {
  return kind == OptimizerKind::AdamW ? "adamw" : "sgd";
}

llvm::StringRef mlir::loom::stringifyPrecision(Precision precision) {
  return precision == Precision::Bf16 ? "bf16" : "fp32";
}

std::optional<LossKind> mlir::loom::parseLoss(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<LossKind>>(s)
      .Case("cross_entropy", LossKind::CrossEntropy)
      .Case("mse", LossKind::Mse)
      .Case("output", LossKind::Output)
      .Default(std::nullopt);
}

std::optional<OptimizerKind> mlir::loom::parseOptimizer(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<OptimizerKind>>(s)
      .Case("adamw", OptimizerKind::AdamW)
      .Case("sgd", OptimizerKind::Sgd)
      .Default(std::nullopt);
}

std::optional<Precision> mlir::loom::parsePrecision(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<Precision>>(s)
      .Case("fp32", Precision::Fp32)
      .Case("bf16", Precision::Bf16)
      .Default(std::nullopt);
}
