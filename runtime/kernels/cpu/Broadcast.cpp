//===- Broadcast.cpp - NumPy broadcasting helpers ----------------*- C++ -*-===//

#include "runtime/kernels/cpu/Broadcast.h"

namespace loom::runtime::cpu {

bool broadcastsTo(const std::vector<int64_t> &from,
                  const std::vector<int64_t> &to) {
  if (from.size() > to.size())
    return false;
  size_t shift = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[i + shift])
      return false;
  return true;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &from,
                                      const std::vector<int64_t> &to) {
  std::vector<int64_t> strides(to.size(), 0);
  size_t shift = to.size() - from.size();
  int64_t stride = 1;
  for (int i = static_cast<int>(from.size()) - 1; i >= 0; --i) {
    strides[i + shift] = (from[i] == 1 && to[i + shift] != 1) ? 0 : stride;
    stride *= from[i];
  }
  return strides;
}

} // namespace loom::runtime::cpu
