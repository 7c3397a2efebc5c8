//===- Broadcast.h - NumPy broadcasting helpers --------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_BROADCAST_H
#define LOOM_RUNTIME_KERNELS_CPU_BROADCAST_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::runtime::cpu {

/// Whether `from` broadcasts to `to` under NumPy rules (right-aligned dims,
/// each dim of `from` equal to the one of `to` or 1).
bool broadcastsTo(const std::vector<int64_t> &from,
                  const std::vector<int64_t> &to);

/// Element strides of `from` indexed by the dims of `to` (0 where `from` is
/// broadcast); `from` must broadcast to `to`.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &from,
                                      const std::vector<int64_t> &to);

/// Offset of `outer` (a row index over all dims of `to` but the last) in an
/// operand with `strides`.
inline int64_t rowOffset(int64_t outer, const std::vector<int64_t> &to,
                         const std::vector<int64_t> &strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(to.size()) - 2; d >= 0; --d) {
    int64_t idx = outer % to[d];
    outer /= to[d];
    off += idx * strides[d];
  }
  return off;
}

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_BROADCAST_H
