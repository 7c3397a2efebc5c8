//===- Communicator.cpp - Mesh-axis sub-communicators ------------*- C++ -*-===//

#include "runtime/comm/Communicator.h"

#include <algorithm>

namespace loom::runtime {

StatusOr<std::unique_ptr<PendingCollective>>
Communicator::startSend(const void *, int64_t, int peer, int) {
  return makeError("rank %d cannot send to rank %d: this communicator has "
                   "no point-to-point transfers",
                   rank(), peer);
}

Status Communicator::checkPeer(int peer) const {
  if (peer < 0 || peer >= size() || peer == rank())
    return makeError("rank %d: no peer rank %d among %d", rank(), peer,
                     size());
  return Status::ok();
}

Status Communicator::recv(void *, int64_t, int peer, int) {
  return makeError("rank %d cannot receive from rank %d: this communicator "
                   "has no point-to-point transfers",
                   rank(), peer);
}

std::vector<int64_t> meshCoordinates(int64_t rank,
                                     const std::vector<int64_t> &sizes) {
  std::vector<int64_t> coords(sizes.size());
  for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
    coords[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return coords;
}

StatusOr<std::unique_ptr<Communicator>>
createAxesCommunicator(Communicator &world, const std::vector<int64_t> &sizes,
                       const std::vector<int64_t> &axes) {
  std::vector<int64_t> coords = meshCoordinates(world.rank(), sizes);
  // Ranks that agree on every axis not in `axes` share a color.
  int64_t color = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    bool listed = std::find(axes.begin(), axes.end(),
                            static_cast<int64_t>(i)) != axes.end();
    color = color * sizes[i] + (listed ? 0 : coords[i]);
  }
  return world.split(static_cast<int>(color), world.rank());
}

} // namespace loom::runtime
