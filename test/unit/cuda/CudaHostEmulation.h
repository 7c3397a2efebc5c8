//===- CudaHostEmulation.h - Run CUDA kernel code on host threads -*- C++
//-*-===//
//
// Lets the host compiler build the kernels of runtime/cuda/*.cu (included
// with `LOOM_CUDA_HOST_EMULATION` defined, which leaves out the launchers)
// and run them without a GPU: one std::thread per CUDA thread, the blocks of
// a grid one after the other, `__syncthreads` a barrier over the block,
// `__syncwarp` and the shuffles a barrier over the warp, `__shared__`
// variables function statics (one block at a time shares them), dynamic
// shared memory one host buffer. It checks a kernel's indexing, tiling,
// masking and arithmetic; not timing, occupancy, bank conflicts or the
// memory model beyond the barriers.
//
// Include this before anything from runtime/cuda/.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_CUDA_CUDAHOSTEMULATION_H
#define LOOM_TEST_UNIT_CUDA_CUDAHOSTEMULATION_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define LOOM_CUDA_HOST_EMULATION 1
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __forceinline__
#define __forceinline__ inline
#define LOOM_DYNAMIC_SHARED(type, name)                                        \
  type *name = reinterpret_cast<type *>(                                       \
      ::loom::runtime::test::emu::dynamicShared.data())

namespace loom::runtime::test::emu {

/// A reusable barrier for `count` threads (C++17 has no std::barrier).
class Barrier {
public:
  explicit Barrier(int count) : count(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    int gen = generation;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return gen != generation; });
  }

private:
  std::mutex mutex;
  std::condition_variable cv;
  int count, arrived = 0, generation = 0;
};

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;
inline Barrier *block = nullptr;
inline std::vector<std::unique_ptr<Barrier>> warps;
inline std::vector<double> exchange(1024);
inline std::vector<double> dynamicShared;
inline std::mutex atomics;

inline int flatThread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
inline void warpSync() { warps[flatThread() / 32]->wait(); }

/// Runs `kernel` on a `grid` of `threads`-thread blocks (x only for the
/// block when `threads` is a number), with `sharedBytes` of dynamic shared
/// memory.
inline void launch(dim3 grid, dim3 threads, size_t sharedBytes,
                   const std::function<void()> &kernel) {
  dynamicShared.assign(sharedBytes / sizeof(double) + 1, NAN);
  int n = threads.x * threads.y * threads.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Barrier all(n);
        block = &all;
        warps.clear();
        for (int w = 0; w < (n + 31) / 32; ++w)
          warps.push_back(std::make_unique<Barrier>(std::min(32, n - 32 * w)));
        std::vector<std::thread> pool;
        for (int t = 0; t < n; ++t)
          pool.emplace_back([&, t] {
            threadIdx = {unsigned(t % threads.x),
                         unsigned(t / threads.x % threads.y),
                         unsigned(t / (threads.x * threads.y))};
            blockIdx = {bx, by, bz};
            blockDim = threads;
            gridDim = grid;
            kernel();
          });
        for (std::thread &th : pool)
          th.join();
      }
}

} // namespace loom::runtime::test::emu

using loom::runtime::test::emu::blockDim;
using loom::runtime::test::emu::blockIdx;
using loom::runtime::test::emu::gridDim;
using loom::runtime::test::emu::threadIdx;
using std::max;
using std::min;

inline void __syncthreads() { loom::runtime::test::emu::block->wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  loom::runtime::test::emu::warpSync();
}

template <typename T> T __shfl_xor_sync(unsigned, T v, int laneMask) {
  namespace emu = loom::runtime::test::emu;
  int t = emu::flatThread();
  emu::exchange[t] = static_cast<double>(v);
  emu::warpSync();
  T r = static_cast<T>(emu::exchange[t ^ laneMask]);
  emu::warpSync();
  return r;
}

template <typename T> T __shfl_down_sync(unsigned, T v, int delta) {
  namespace emu = loom::runtime::test::emu;
  int t = emu::flatThread();
  emu::exchange[t] = static_cast<double>(v);
  emu::warpSync();
  T r = static_cast<T>(emu::exchange[(t & 31) + delta < 32 ? t + delta : t]);
  emu::warpSync();
  return r;
}

inline int atomicCAS(int *p, int compare, int value) {
  std::lock_guard<std::mutex> lock(loom::runtime::test::emu::atomics);
  int old = *p;
  if (old == compare)
    *p = value;
  return old;
}

#endif // LOOM_TEST_UNIT_CUDA_CUDAHOSTEMULATION_H
