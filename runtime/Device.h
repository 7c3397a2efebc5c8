//===- Device.h - Where a program's arena lives and its kernels run -*- C++
//-*-===//
//
// The executor runs on the host (CPU kernels on the host arena) unless it is
// given a `Device`. A device owns a second copy of the arena in its own
// memory and a kernel table of its own; the host arena then only stages
// values: weights are initialised there (the CPU paths are reused) and
// uploaded once, INPUT/TARGET slices are written there and uploaded every
// step, and reads go through `download`.
//
// This header has no CUDA dependency: the CUDA backend (runtime/cuda/,
// library `LoomRuntimeCuda`) implements it, and a CPU-only build never sees
// CUDA headers or libraries.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DEVICE_H
#define LOOM_RUNTIME_DEVICE_H

#include "runtime/kernels/Kernel.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::runtime {

class Device {
public:
  virtual ~Device() = default;

  /// "cuda:0 (NVIDIA H200)" style text, for logs.
  virtual std::string name() const = 0;

  /// The kernel of op `name` on this device, or null when the device has
  /// none yet. Its `verify` is the CPU one (plans are validated once); its
  /// `bind` gets a `BindContext` whose `arena()` is the device arena and
  /// whose `device()` is this device.
  virtual const KernelDef *findKernel(std::string_view name) const = 0;

  /// Allocates `bytes` of zeroed device memory for a program's arena (one
  /// allocation per executor). Freed with `freeArena`.
  virtual StatusOr<uint8_t *> allocateArena(int64_t bytes) = 0;
  virtual void freeArena(uint8_t *arena) = 0;

  /// Host -> device and device -> host copies, ordered after the work
  /// queued so far; `download` returns when the bytes are on the host.
  virtual Status upload(uint8_t *deviceDst, const uint8_t *hostSrc,
                        int64_t bytes) = 0;
  virtual Status download(uint8_t *hostDst, const uint8_t *deviceSrc,
                          int64_t bytes) = 0;

  /// Waits for all queued work. Reports failures that kernels detect on the
  /// device (asynchronous launch errors, data checks such as cross-entropy
  /// targets outside the class range) as an error.
  virtual Status synchronize() = 0;

  /// The device memory in use now, by every process and library on the
  /// device (negative when the device cannot say).
  virtual int64_t usedMemoryBytes() const { return -1; }
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DEVICE_H
