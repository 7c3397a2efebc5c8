//===- MemoryLedger.h - What the runtime holds for tensors -----*- C++ -*-===//
//
// Every allocation the runtime makes for tensor bytes goes through a
// ledger: the arenas, the kernels' workspace and scratch (host vectors use
// `CountedVector`, device buffers record their `cudaMalloc`s) and the host
// staging buffers. Its high-water mark is the memory figure of the
// metrics, measured, so it can differ from the plan: a kernel that
// allocated on the hot path would show. Bookkeeping (shapes, names, plan
// messages) and the libraries' own buffers (OpenBLAS, MPI) are not tensor
// bytes and are not counted. One ledger for host memory and one for device
// memory a process; the ranks of `--verify-against` share them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SUPPORT_MEMORYLEDGER_H
#define LOOM_RUNTIME_SUPPORT_MEMORYLEDGER_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::runtime {

class MemoryLedger {
public:
  /// The process's host and device ledgers.
  static MemoryLedger &host();
  static MemoryLedger &device();

  void add(int64_t bytes);
  void remove(int64_t bytes);
  /// Bytes held now, and the most held at once since the process started
  /// (or since `resetPeak`).
  int64_t current() const { return now.load(); }
  int64_t peak() const { return most.load(); }
  /// Starts the high-water mark again from what is held now.
  void resetPeak() { most.store(now.load()); }

private:
  std::atomic<int64_t> now{0}, most{0};
};

/// A std::allocator that records in the host ledger.
template <typename T> struct CountedAllocator {
  using value_type = T;
  CountedAllocator() = default;
  template <typename U> CountedAllocator(const CountedAllocator<U> &) {}
  T *allocate(std::size_t n) {
    T *p = std::allocator<T>().allocate(n);
    MemoryLedger::host().add(static_cast<int64_t>(n * sizeof(T)));
    return p;
  }
  void deallocate(T *p, std::size_t n) {
    MemoryLedger::host().remove(static_cast<int64_t>(n * sizeof(T)));
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U> bool operator==(const CountedAllocator<U> &) const {
    return true;
  }
  template <typename U> bool operator!=(const CountedAllocator<U> &) const {
    return false;
  }
};

/// Host tensor bytes the ledger counts.
template <typename T> using CountedVector = std::vector<T, CountedAllocator<T>>;

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_MEMORYLEDGER_H
