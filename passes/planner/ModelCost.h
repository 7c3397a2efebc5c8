//===- ModelCost.h - The model as the joint search costs it -----*- C++ -*-===//
//
// The joint search's request about the model, as plain data: a table of its
// layers, each costed per sample on one device (tp = 1) with what tensor
// parallelism splits and exchanges, and the parts before the first layer
// (the embedding: first pipeline stage) and after the last (the head and the
// loss: last stage). Two builders fill it: a model spec's closed forms
// (ModelSpec.h, `modelCostOf`) and the training step's IR
// (passes/ModelCostAnalysis.h), so a shape and an ONNX file take one search
// and one cost model (CandidateCost.h). docs/planner.md, "The request".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_MODELCOST_H
#define LOOM_PASSES_PLANNER_MODELCOST_H

#include "passes/planner/CostModel.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mlir::loom::planner {

/// Which dimension of a product tensor parallelism splits: none (each tp
/// rank runs it whole), its columns (the weight's output features:
/// Megatron's column-parallel linear) or its inner dimension (row-parallel:
/// each rank's result is a partial sum).
enum class TpSplit { None, Columns, Inner };

/// A matrix product of `rows` x `inner` by `inner` x `columns`; `rows` per
/// sample (a sequence's tokens, an image's output pixels). Its backward runs
/// the activation gradient (rows x columns by columns x inner) and the
/// weight gradient (inner x rows by rows x columns).
struct ProductCost {
  double rows = 0, columns = 0, inner = 0;
  TpSplit split = TpSplit::None;
};

/// When a tensor-parallel collective runs.
enum class TpPhase { Forward, Backward, FullRecompute, SelectiveRecompute };

/// `count` collectives over the tp axis of `bytesPerSample` each (the whole
/// buffer, as collectiveSeconds counts it).
struct TpCollective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  double bytesPerSample = 0;
  TpPhase phase = TpPhase::Forward;
  int64_t count = 1;
};

/// The activation bytes per sample that one micro-batch of a part keeps from
/// its forward to its backward under one recomputation mode.
struct KeptBytes {
  /// At tp = 1.
  double bytes = 0;
  /// Of `bytes`, what tp leaves whole without sequence parallelism (a norm's
  /// input and output); the rest is split.
  double whole = 0;
  /// Under sequence parallelism, before the split over tp.
  double sequenceParallel = 0;
};

/// One part of the model: a layer, or what runs before or after the layers.
struct PartCost {
  /// The layer key (`h.3`), `embedding` or `head`.
  std::string name;
  /// Its forward products.
  std::vector<ProductCost> products;
  /// Attention's forward FLOPs per sample (the masked half of causal
  /// attention skipped), split over the heads; its backward is 2.5 times.
  double attentionFlops = 0;
  /// Memory-bound bytes per sample in the forward and in the backward
  /// (split over tp: sequence parallelism on whole values), and those no tp
  /// split shares (an embedding lookup).
  double forwardBytes = 0, backwardBytes = 0, wholeBytes = 0;
  /// Memory-bound bytes a micro-batch whatever its samples (an embedding
  /// table's gradient), split over tp.
  double fixedBytes = 0;
  /// The memory-bound bytes per sample `selective` recomputation runs again
  /// (norms, activations), split over tp.
  double selectiveBytes = 0;
  /// Parameters tp splits, and those each tp rank holds whole (norms).
  double splitParameters = 0, wholeParameters = 0;
  /// Elements of its largest weight (ZeRO-3 holds it gathered), before tp.
  double largestWeight = 0;
  std::vector<TpCollective> tpCollectives;
  /// What one micro-batch keeps for the backward, by `Remat`.
  std::array<KeptBytes, 3> kept;
  /// Bytes per sample one micro-batch holds only while it runs (the
  /// logits and their softmax), split over tp.
  double transientBytes = 0;
  /// Bytes per sample it hands the next part (sent between stages), split
  /// over tp.
  double boundaryBytes = 0;
  /// Parts of one kind are alike (identical layers); -1: unique.
  int64_t kind = -1;

  double parameters() const { return splitParameters + wholeParameters; }
};

struct ModelCost {
  /// As the user gave it: the spec's text or the model file.
  std::string name;
  /// `gpt`, `llama`, or `onnx` for an imported model.
  std::string family;
  PartCost first, last;
  std::vector<PartCost> layers;
  /// Parameters the first and the last stage share (a head tied to the
  /// embedding): their gradient is summed between the two.
  double tiedParameters = 0;
  /// tp must divide each (attention's heads and kv heads; a spec's MLP
  /// width). A product whose split dimension tp does not divide runs whole
  /// (a head over GPT-2's 50257 words).
  std::vector<int64_t> tpDivides;
  /// The most tp may be (1 when nothing splits).
  int64_t maxTp = 1;
  /// Model FLOPs of one sample, forward and backward, no recomputation
  /// (Megatron-LM's count: attention not halved for causality).
  double modelFlopsPerSample = 0;
  int64_t parameters = 0;
  /// Batch statistics (batch norm) need the whole share of a rank at once:
  /// one micro-batch.
  bool oneMicroBatch = false;

  int64_t numLayers() const { return int64_t(layers.size()); }
  /// Whether every layer is of one kind.
  bool uniformLayers() const;
};

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_MODELCOST_H
