//===- InitRules.h - How each parameter is initialised ----------*- C++ -*-===//
//
// The rule a plan records for every PARAMETER (`Buffer.init_rule`): what
// `loom-run --init random:SEED` fills it with, read from how the step uses it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_EMIT_INITRULES_H
#define LOOM_EMIT_INITRULES_H

#include "runtime/plan.pb.h"

#include "mlir/IR/Value.h"

namespace mlir::loom {

/// The standard deviation of normally initialised parameters: GPT-2's,
/// BERT's and LLaMA's `initializer_range`.
inline constexpr double kInitStd = 0.02;

/// The init rule of the parameter `param` (an argument of `@main`), from its
/// uses: the scale of a `layer_norm` / `rms_norm` / `batch_norm` is ONES; the
/// bias of a norm or `linear`, and any other parameter of rank 0 or 1, is
/// ZEROS; everything else (matrices, embeddings, convolution kernels) is
/// NORMAL with std `kInitStd`.
::loom::plan::InitRule chooseInitRule(Value param);

} // namespace mlir::loom

#endif // LOOM_EMIT_INITRULES_H
