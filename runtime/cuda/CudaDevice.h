//===- CudaDevice.h - One GPU: stream, cuBLASLt, arena, checks ----*- C++
//-*-===//
//
// Internal to `LoomRuntimeCuda`. Every kernel of a program runs on the one
// stream of its device, in instruction order, so no other synchronisation is
// needed inside a step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDADEVICE_H
#define LOOM_RUNTIME_CUDA_CUDADEVICE_H

#include "runtime/Device.h"
#include "runtime/Workspace.h"
#include "runtime/cuda/CudaStatus.h"

#include <memory>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace loom::runtime::cuda {

/// Where a kernel records the first failed data check of a step (device
/// memory; `check` 0 means none). Read and cleared by `synchronize`.
struct DataCheckRecord {
  int check; // 1 + index into CudaDevice's check descriptions
  int pad;
  long long position; // e.g. the logits row
  long long value;    // the offending value
  long long limit;    // the exclusive upper bound it broke
};

/// Device memory owned by a prepared call (kernel workspace).
using DeviceBuffer = std::shared_ptr<void>;

class CudaDevice final : public Device {
public:
  static StatusOr<std::unique_ptr<CudaDevice>> create(int ordinal);
  ~CudaDevice() override;

  std::string name() const override { return deviceName; }
  const KernelDef *findKernel(std::string_view name) const override;
  StatusOr<uint8_t *> allocateArena(int64_t bytes) override;
  void freeArena(uint8_t *arena) override;
  Status upload(uint8_t *deviceDst, const uint8_t *hostSrc,
                int64_t bytes) override;
  Status download(uint8_t *hostDst, const uint8_t *deviceSrc,
                  int64_t bytes) override;
  Status synchronize() override;
  int64_t usedMemoryBytes() const override;

  int ordinal() const { return theOrdinal; }
  cudaStream_t stream() const { return theStream; }
  cublasLtHandle_t lt() const { return ltHandle; }
  void *gemmWorkspace() const { return workspace; }
  size_t gemmWorkspaceBytes() const { return kGemmWorkspaceBytes; }

  /// `bytes` of device memory for a kernel's scratch, freed when the last
  /// owner drops it (allocated at bind time, never per step).
  StatusOr<DeviceBuffer> allocateWorkspace(int64_t bytes);

  /// The score workspace of the GEMM path of attention, one per device and
  /// shared by every attention instruction (they run one after another on
  /// the stream). A bind grows it to at least `bytes` (grow only, kept
  /// until the device goes); since a later bind may move it, calls read
  /// `attentionWorkspace()` when they run. Allocated with 256-byte alignment.
  Status reserveAttentionWorkspace(int64_t bytes);
  void *attentionWorkspace() const { return attn.p; }
  int64_t attentionWorkspaceBytes() const { return attn.bytes; }

  /// The workspace of padded GEMMs (Matmul.cpp: copies of operands whose
  /// rows are not 16-byte aligned), shared like the attention workspace:
  /// grow only, 256-byte aligned, read when a call runs.
  Status reserveGemmPadWorkspace(int64_t bytes);
  void *gemmPadWorkspace() const { return gemmPad.p; }
  int64_t gemmPadWorkspaceBytes() const { return gemmPad.bytes; }

  /// Registers a data check a kernel may fail. The error reads
  /// `context: ` + `format` printed with (position, value, limit) as three
  /// `long long`s, e.g. "target class id %2$lld in row %1$lld is outside
  /// [0, %3$lld)". Returns the id the kernel writes into
  /// `checkRecord()->check`.
  int registerCheck(const std::string &context, const std::string &format);
  DataCheckRecord *checkRecord() const { return record; }

private:
  CudaDevice() = default;
  static constexpr size_t kGemmWorkspaceBytes = kCudaGemmWorkspaceBytes;

  int theOrdinal = 0;
  std::string deviceName;
  cudaStream_t theStream = nullptr;
  cublasLtHandle_t ltHandle = nullptr;
  void *workspace = nullptr;

  /// A grow-only device buffer shared by the instructions of one kind.
  struct SharedWorkspace {
    std::mutex mutex;
    void *p = nullptr;
    int64_t bytes = 0;
  };
  Status reserve(SharedWorkspace &w, int64_t bytes, const char *what);
  SharedWorkspace attn, gemmPad;
  /// The arenas' sizes, taken off the device ledger when they are freed.
  std::mutex arenasMutex;
  std::vector<std::pair<uint8_t *, int64_t>> arenas;
  DataCheckRecord *record = nullptr;
  std::mutex checksMutex;
  std::vector<std::string> checkFormats;
};

/// The kernel table of the CUDA backend (CudaRegistry.cpp).
const KernelDef *findCudaKernel(std::string_view name);

/// The `CudaDevice` behind a bind context (kernels of this backend are only
/// bound with one).
inline CudaDevice &cudaDevice(BindContext &ctx) {
  return *static_cast<CudaDevice *>(ctx.device());
}

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDADEVICE_H
