//===- CheckpointLayout.cpp - Which rank writes which shard ---------------===//

#include "runtime/checkpoint/CheckpointLayout.h"

#include "runtime/PlanFormat.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>

namespace loom::runtime {

std::string TensorKey::describe() const {
  switch (role) {
  case plan::PARAMETER:
    return "parameter '" + name + "'";
  case plan::OPTIMIZER_STATE:
    return "optimizer state " + state + " of '" + name + "'";
  case plan::RUNNING_STAT:
    return "running stat '" + name + "'";
  default:
    return "tensor '" + name + "'";
  }
}

bool isCheckpointed(const plan::Buffer &b) {
  return b.role() == plan::PARAMETER || b.role() == plan::OPTIMIZER_STATE ||
         b.role() == plan::RUNNING_STAT;
}

TensorKey tensorKey(const plan::Buffer &b) {
  TensorKey key;
  key.role = b.role();
  if (b.role() == plan::OPTIMIZER_STATE) {
    key.name = b.binding().empty() ? b.name() : b.binding();
    key.state = b.state();
  } else {
    key.name = exportName(b);
  }
  return key;
}

StatusOr<std::vector<HeldTensor>> heldTensors(const plan::Plan &plan,
                                              const std::string &what) {
  std::vector<int64_t> sizes = meshSizes(plan);
  std::map<TensorKey, std::vector<ShardHolder>> holders;
  for (int r = 0; r < plan.world_size(); ++r) {
    int index = findProgramIndex(plan, r);
    if (index < 0)
      continue;
    std::vector<int64_t> coords = meshCoordinates(r, sizes);
    for (const plan::Buffer &b : plan.programs(index).buffers())
      if (isCheckpointed(b))
        holders[tensorKey(b)].push_back({r, &b, shardLayout(b, sizes, coords)});
  }
  std::vector<HeldTensor> tensors;
  for (auto &[key, list] : holders) {
    const ShardHolder &first = list.front();
    HeldTensor tensor{
        key, first.buffer->dtype(), globalShape(*first.buffer), {}};
    std::string where = what + ": " + key.describe();
    for (const ShardHolder &h : list) {
      if (h.buffer->dtype() != tensor.dtype ||
          globalShape(*h.buffer) != tensor.globalShape)
        return makeError("%s: rank %d holds a %s %s, rank %d a %s %s",
                         where.c_str(), first.rank, dtypeName(tensor.dtype),
                         shapeToString(tensor.globalShape).c_str(), h.rank,
                         dtypeName(h.buffer->dtype()),
                         shapeToString(globalShape(*h.buffer)).c_str());
      auto same = std::find_if(
          tensor.shards.begin(), tensor.shards.end(), [&](const auto &copies) {
            return copies.front().layout.dims == h.layout.dims;
          });
      if (same != tensor.shards.end())
        same->push_back(h);
      else
        tensor.shards.push_back({h});
    }
    for (std::vector<ShardHolder> &copies : tensor.shards)
      if (copies.front().layout.isWhole()) {
        std::vector<ShardHolder> whole = std::move(copies);
        tensor.shards = {std::move(whole)};
        break;
      }
    int64_t covered = 0;
    for (const std::vector<ShardHolder> &copies : tensor.shards)
      covered += numElements(copies.front().layout.local);
    if (covered != numElements(tensor.globalShape))
      return makeError("%s: the shards of the ranks hold %lld of the %lld "
                       "elements of its global shape %s",
                       where.c_str(), (long long)covered,
                       (long long)numElements(tensor.globalShape),
                       shapeToString(tensor.globalShape).c_str());
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

StatusOr<CheckpointLayout> computeCheckpointLayout(const plan::Plan &plan,
                                                   const std::string &what) {
  LOOM_ASSIGN_OR_RETURN(std::vector<HeldTensor> held, heldTensors(plan, what));
  CheckpointLayout layout;
  layout.blocksPerRank.assign(plan.world_size(), 0);
  layout.bytesPerRank.assign(plan.world_size(), 0);
  for (size_t i = 0; i < held.size(); ++i) {
    const HeldTensor &h = held[i];
    if (h.dtype != plan::F32 && h.dtype != plan::I64)
      return makeError("%s: %s is %s; checkpoints hold f32 and i64 tensors",
                       what.c_str(), h.key.describe().c_str(),
                       dtypeName(h.dtype));
    CheckpointTensor tensor{h.key, h.dtype, h.globalShape, {}};
    // Replicas take turns by tensor, spreading the writing over them.
    for (const std::vector<ShardHolder> &copies : h.shards) {
      const ShardHolder &writer = copies[i % copies.size()];
      int64_t bytes = numElements(writer.layout.local) * dtypeSize(h.dtype);
      tensor.blocks.push_back({writer, layout.bytesPerRank[writer.rank], bytes,
                               layout.blocksPerRank[writer.rank]++});
      layout.bytesPerRank[writer.rank] += bytes;
    }
    layout.tensors.push_back(std::move(tensor));
  }
  return layout;
}

std::map<TensorKey, TensorShape> planTensors(const plan::Plan &plan) {
  std::map<TensorKey, TensorShape> tensors;
  for (const plan::Program &program : plan.programs())
    for (const plan::Buffer &b : program.buffers())
      if (isCheckpointed(b))
        tensors[tensorKey(b)] = {b.dtype(), globalShape(b)};
  return tensors;
}

} // namespace loom::runtime
