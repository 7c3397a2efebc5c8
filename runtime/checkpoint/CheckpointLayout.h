//===- CheckpointLayout.h - Which rank writes which shard ---------*- C++
//-*-===//
//
// The state a checkpoint holds is every PARAMETER, OPTIMIZER_STATE and
// RUNNING_STAT of the plan, each a global tensor named by a `TensorKey`.
// Ranks hold shards of them (tensor parallelism, ZeRO), replicas of each
// other's shards (data parallelism), or none (pipeline stages). This file
// decides, from the plan alone, so that every rank decides the same: one
// writer for each distinct shard (replicas take turns by tensor, to spread
// the writing), and where each written block lies in its rank's file.
// Part of the runtime's format code: no kernels, no communicators.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CHECKPOINT_CHECKPOINTLAYOUT_H
#define LOOM_RUNTIME_CHECKPOINT_CHECKPOINTLAYOUT_H

#include "runtime/ShardLayout.h"
#include "runtime/plan.pb.h"
#include "runtime/support/Status.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace loom::runtime {

/// A tensor of the training state: a parameter (by its exported name), one
/// of a parameter's optimizer states, or a running statistic (by its
/// initializer).
struct TensorKey {
  plan::Role role = plan::ROLE_UNSPECIFIED;
  std::string name;
  std::string state; ///< OPTIMIZER_STATE only

  bool operator<(const TensorKey &o) const {
    return std::tie(role, name, state) < std::tie(o.role, o.name, o.state);
  }
  bool operator==(const TensorKey &o) const {
    return role == o.role && name == o.name && state == o.state;
  }
  /// "parameter 'w'", "optimizer state exp_avg of 'w'", "running stat 'm'".
  std::string describe() const;
};

/// Whether a checkpoint holds `b`'s role (PARAMETER, OPTIMIZER_STATE,
/// RUNNING_STAT), and the key of `b`'s tensor.
bool isCheckpointed(const plan::Buffer &b);
TensorKey tensorKey(const plan::Buffer &b);

/// A rank's buffer of a tensor and the place of its shard in it.
struct ShardHolder {
  int rank = 0;
  const plan::Buffer *buffer = nullptr; ///< in `rank`'s program
  ShardLayout layout;
};

/// A tensor of the training state and who holds it: its distinct shards
/// (disjoint, covering it once), each with the ranks that hold a copy of
/// it in rank order. A whole copy is the only shard when any rank has one.
struct HeldTensor {
  TensorKey key;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> globalShape;
  std::vector<std::vector<ShardHolder>> shards;
};

/// Every checkpointed tensor of a validated `plan`, in key order. Errors
/// (one line, prefixed with `what`) when the ranks disagree on a tensor's
/// type or global shape, or when its distinct shards do not cover it
/// exactly once. What `--export-onnx` gathers and a checkpoint writes.
StatusOr<std::vector<HeldTensor>> heldTensors(const plan::Plan &plan,
                                              const std::string &what);

/// One written shard (the writer's copy of it) and where it lies in the
/// writer's file.
struct CheckpointBlock : ShardHolder {
  int64_t offset = 0; ///< byte offset in rank's file
  int64_t sizeBytes = 0;
  int indexInRank = 0; ///< position among `rank`'s blocks
};

struct CheckpointTensor {
  TensorKey key;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> globalShape;
  std::vector<CheckpointBlock> blocks; ///< disjoint, covering it once
};

/// What each rank writes for `plan`: every checkpointed tensor in key
/// order, and how many blocks each rank writes.
struct CheckpointLayout {
  std::vector<CheckpointTensor> tensors;
  std::vector<int> blocksPerRank;
  std::vector<int64_t> bytesPerRank;
};

/// Computes the layout of a validated `plan`: `heldTensors`' errors, and
/// one for a checkpointed buffer that is not F32 or I64.
StatusOr<CheckpointLayout> computeCheckpointLayout(const plan::Plan &plan,
                                                   const std::string &what);

/// The tensors `plan` holds, with their type and global shape (what a
/// checkpoint must provide to resume it).
struct TensorShape {
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> globalShape;
};
std::map<TensorKey, TensorShape> planTensors(const plan::Plan &plan);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_CHECKPOINT_CHECKPOINTLAYOUT_H
