//===- Options.h - The choices the pipelines take ---------------*- C++ -*-===//
//
// Loss, optimizer and precision as enums, with the spellings of `loomc`'s
// flags and of the passes' options. The `..._VALUES` lists are the
// `llvm::cl::values` of every option that takes one (Passes.td and the
// pipeline options), so a spelling is defined once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_OPTIONS_H
#define LOOM_PASSES_OPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

namespace mlir::loom {

enum class LossKind { CrossEntropy, Mse, Output };
enum class OptimizerKind { AdamW, Sgd };
enum class Precision { Fp32, Bf16 };

#define LOOM_LOSS_VALUES                                                       \
  clEnumValN(::mlir::loom::LossKind::CrossEntropy, "cross_entropy",            \
             "mean softmax cross-entropy over the last dimension"),            \
      clEnumValN(::mlir::loom::LossKind::Mse, "mse", "mean squared error"),    \
      clEnumValN(::mlir::loom::LossKind::Output, "output",                     \
                 "the model's own scalar output")
#define LOOM_OPTIMIZER_VALUES                                                  \
  clEnumValN(::mlir::loom::OptimizerKind::AdamW, "adamw", "PyTorch's AdamW"),  \
      clEnumValN(::mlir::loom::OptimizerKind::Sgd, "sgd", "PyTorch's SGD")
#define LOOM_PRECISION_VALUES                                                  \
  clEnumValN(::mlir::loom::Precision::Fp32, "fp32", "f32 everywhere"),         \
      clEnumValN(::mlir::loom::Precision::Bf16, "bf16",                        \
                 "bf16 compute, f32 master weights")

/// The flag spelling of each choice (`cross_entropy`, `adamw`, `bf16`, ...).
llvm::StringRef stringifyLoss(LossKind kind);
llvm::StringRef stringifyOptimizer(OptimizerKind kind);
llvm::StringRef stringifyPrecision(Precision precision);

/// The choice a spelling names, if any.
std::optional<LossKind> parseLoss(llvm::StringRef s);
std::optional<OptimizerKind> parseOptimizer(llvm::StringRef s);
std::optional<Precision> parsePrecision(llvm::StringRef s);

} // namespace mlir::loom

#endif // LOOM_PASSES_OPTIONS_H
