//===- ModelSpec.h - A transformer described by its shape --------*- C++ -*-===//
//
// `loomc --model-spec gpt:l=96,h=12288,a=96,s=2048,v=51200`: a decoder-only
// transformer given by its shape, and what the joint search needs to know of
// it: the parameters of each part, the matrix products one layer runs on a
// micro-batch and the activations it keeps, as the search's table
// (`modelCostOf`, ModelCost.h). docs/planner.md, "Joint search".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_MODELSPEC_H
#define LOOM_PASSES_PLANNER_MODELSPEC_H

#include "passes/planner/ModelCost.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mlir::loom::planner {

/// GPT-2/GPT-3 (learned positions, layer norm with biases, GELU MLP, biases,
/// the head tied to the embedding) or LLaMA (RMS norm, SwiGLU MLP, no
/// biases, grouped-query attention, an untied head).
enum class Arch { Gpt, Llama };

struct GptSpec {
  std::string text; // as given
  Arch arch = Arch::Gpt;
  int64_t layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0;
  /// The MLP's inner width (gpt: 4h; llama: 8h/3 rounded up to 256).
  int64_t ffn = 0;
  /// Key and value heads (grouped-query attention); default: `heads`.
  int64_t kvHeads = 0;

  int64_t headDim() const { return hidden / heads; }
  /// Width of the keys (and of the values): kv heads x head dimension.
  int64_t kvWidth() const { return kvHeads * headDim(); }
  /// Parameters of one layer, of the embedding (token and position tables,
  /// the final norm) and of an untied head.
  int64_t layerParameters() const;
  int64_t embeddingParameters() const;
  int64_t headParameters() const;
  int64_t parameters() const {
    return layers * layerParameters() + embeddingParameters() +
           headParameters();
  }
  /// Of a layer's parameters, those of its norms (not split by tensor
  /// parallelism).
  int64_t layerNormParameters() const;
  /// Forward FLOPs of one sequence: every matrix product twice its
  /// multiply-adds, attention over all s keys (not halved for causality), as
  /// Megatron-LM counts model FLOPs.
  double forwardFlopsPerSequence() const;
  /// Elements one layer keeps for its backward per token, per mode of
  /// recomputation, before any split over tensor parallelism: `none` (every
  /// product's input, both norms' inputs and outputs, the MLP's
  /// activations), `selective` (less the norms' outputs and the MLP
  /// activation's output, recomputed) and `full` (the layer's input).
  double keptElementsPerToken(llvm::StringRef remat) const;
};

/// Parses `gpt:l=..,h=..,a=..,s=..,v=..[,ffn=..,kv_heads=..,arch=gpt|llama]`
/// (l layers, h hidden width, a attention heads, s sequence length, v
/// vocabulary). Errors name the item and say what is expected.
llvm::Expected<GptSpec> parseModelSpec(llvm::StringRef text);

/// The joint search's table of `spec` trained in `precision`: its layers
/// alike (`layer.0`, ...), the embedding first and the head with the loss
/// last, per sequence. The search's figures for the table are those of the
/// closed forms docs/planner.md, "Joint search", writes out.
ModelCost modelCostOf(const GptSpec &spec, Precision precision);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_MODELSPEC_H
