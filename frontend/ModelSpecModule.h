//===- ModelSpecModule.h - A model spec as loom IR --------------*- C++ -*-===//
//
// `loomc --model-spec gpt:l=..,h=..`: the forward function an exported
// Hugging Face GPT-2 (or, with arch=llama, LLaMA) of that shape imports to
// and raises to (input
// `input_ids` [B, s] int64, output `logits` [B, s, V]; parameters named as
// the state dict, without values), so a transformer given by its shape is
// planned, compiled and emitted like an ONNX file planned with
// --no-weights. docs/loomc.md, "Planning by shape".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_FRONTEND_MODELSPECMODULE_H
#define LOOM_FRONTEND_MODELSPECMODULE_H

#include "passes/planner/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::loom {

/// The forward function of `spec` at `batch` sequences, or null after an
/// error on `ctx` (a LLaMA head dimension that is odd). Without
/// `constantValues` (a module only planned), LLaMA's rotary tables are
/// zeros of their shape, not s x e cosines and sines.
OwningOpRef<ModuleOp> buildModelSpecModule(MLIRContext *ctx,
                                           const planner::GptSpec &spec,
                                           int64_t batch,
                                           bool constantValues = true);

} // namespace mlir::loom

#endif // LOOM_FRONTEND_MODELSPECMODULE_H
