//===- CheckpointLayout.cpp - Which rank writes which shard ---------------===//

#include "runtime/checkpoint/CheckpointLayout.h"

#include "runtime/PlanFormat.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/HostTensor.h"

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

namespace {

/// A rank's buffer of a tensor and the place of its shard.
struct Holder {
  int rank;
  const plan::Buffer *buffer;
  ShardLayout layout;
};

} // namespace

StatusOr<CheckpointLayout> computeCheckpointLayout(const plan::Plan &plan,
                                                   const std::string &what) {
  std::vector<int64_t> sizes = meshSizes(plan);
  std::map<TensorKey, std::vector<Holder>> holders;
  for (int r = 0; r < plan.world_size(); ++r) {
    int index = findProgramIndex(plan, r);
    if (index < 0)
      continue;
    std::vector<int64_t> coords = meshCoordinates(r, sizes);
    for (const plan::Buffer &b : plan.programs(index).buffers())
      if (isCheckpointed(b))
        holders[tensorKey(b)].push_back(
            {r, &b, shardLayout(b, sizes, coords)});
  }

  CheckpointLayout layout;
  layout.blocksPerRank.assign(plan.world_size(), 0);
  layout.bytesPerRank.assign(plan.world_size(), 0);
  int64_t tensorIndex = 0;
  for (auto &[key, list] : holders) {
    const Holder &first = list.front();
    CheckpointTensor tensor;
    tensor.key = key;
    tensor.dtype = first.buffer->dtype();
    tensor.globalShape = globalShape(*first.buffer);
    std::string where = what + ": " + key.describe();
    if (tensor.dtype != plan::F32 && tensor.dtype != plan::I64)
      return makeError("%s is %s; checkpoints hold f32 and i64 tensors",
                       where.c_str(), dtypeName(tensor.dtype));
    // The distinct shards, each with the ranks that hold a copy of it.
    std::vector<std::vector<const Holder *>> shards;
    for (const Holder &h : list) {
      if (h.buffer->dtype() != tensor.dtype ||
          globalShape(*h.buffer) != tensor.globalShape)
        return makeError("%s: rank %d holds a %s %s, rank %d a %s %s",
                         where.c_str(), first.rank, dtypeName(tensor.dtype),
                         shapeToString(tensor.globalShape).c_str(), h.rank,
                         dtypeName(h.buffer->dtype()),
                         shapeToString(globalShape(*h.buffer)).c_str());
      bool found = false;
      for (std::vector<const Holder *> &copies : shards)
        if (copies.front()->layout.dims == h.layout.dims) {
          copies.push_back(&h);
          found = true;
          break;
        }
      if (!found)
        shards.push_back({&h});
    }
    // A whole copy alone is the tensor.
    for (std::vector<const Holder *> &copies : shards)
      if (copies.front()->layout.isWhole()) {
        std::vector<const Holder *> whole = copies;
        shards = {whole};
        break;
      }
    int64_t covered = 0;
    for (const std::vector<const Holder *> &copies : shards)
      covered += numElements(copies.front()->layout.local);
    if (covered != numElements(tensor.globalShape))
      return makeError("%s: the shards of the ranks hold %lld of the %lld "
                       "elements of its global shape %s",
                       where.c_str(), (long long)covered,
                       (long long)numElements(tensor.globalShape),
                       shapeToString(tensor.globalShape).c_str());
    for (const std::vector<const Holder *> &copies : shards) {
      const Holder &writer =
          *copies[static_cast<size_t>(tensorIndex) % copies.size()];
      CheckpointBlock block;
      block.rank = writer.rank;
      block.buffer = writer.buffer;
      block.layout = writer.layout;
      block.sizeBytes =
          numElements(writer.layout.local) * dtypeSize(tensor.dtype);
      block.offset = layout.bytesPerRank[writer.rank];
      block.indexInRank = layout.blocksPerRank[writer.rank]++;
      layout.bytesPerRank[writer.rank] += block.sizeBytes;
      tensor.blocks.push_back(std::move(block));
    }
    layout.tensors.push_back(std::move(tensor));
    ++tensorIndex;
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
