//===- CudaDevice.cpp - One GPU: stream, cuBLASLt, arena, checks -*- C++
//-*-===//

#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/support/MemoryLedger.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace loom::runtime::cuda {

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

namespace {

/// The node-local rank from the launcher's environment (0 without one).
int localRank() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                          "MPI_LOCALRANKID", "LOCAL_RANK"})
    if (const char *v = std::getenv(var); v && *v)
      return std::atoi(v);
  return 0;
}

} // namespace

StatusOr<std::unique_ptr<Device>> createCudaDevice() {
  int n = deviceCount();
  if (n == 0)
    return makeError("--device cuda: no CUDA device is visible (check the "
                     "driver and CUDA_VISIBLE_DEVICES)");
  LOOM_ASSIGN_OR_RETURN(auto device, CudaDevice::create(localRank() % n));
  return std::unique_ptr<Device>(std::move(device));
}

StatusOr<int> countDistinctDevices(Communicator &host, Device &device) {
  auto &cudaDev = static_cast<CudaDevice &>(device);
  cudaDeviceProp prop;
  Status found = cudaCheck(cudaGetDeviceProperties(&prop, cudaDev.ordinal()),
                           "cudaGetDeviceProperties");
  // The gather runs whatever happened here, so no rank waits in it alone.
  if (!found.isOk())
    std::memset(prop.uuid.bytes, 0, sizeof(prop.uuid.bytes));
  // The UUID names the physical GPU whatever CUDA_VISIBLE_DEVICES made of
  // its ordinal, so ranks that see different subsets still compare right.
  constexpr int64_t kUuid = sizeof(prop.uuid.bytes);
  std::vector<char> all(static_cast<size_t>(host.size() * kUuid));
  LOOM_RETURN_IF_ERROR(host.allGather(prop.uuid.bytes, all.data(), kUuid));
  LOOM_RETURN_IF_ERROR(found);
  std::set<std::string> distinct;
  for (int r = 0; r < host.size(); ++r)
    distinct.insert(std::string(all.data() + r * kUuid, kUuid));
  return static_cast<int>(distinct.size());
}

StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::create(int ordinal) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->theOrdinal = ordinal;
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaSetDevice(ordinal), "cudaSetDevice"));
  cudaDeviceProp prop;
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaGetDeviceProperties(&prop, ordinal),
                                 "cudaGetDeviceProperties"));
  d->deviceName = "cuda:" + std::to_string(ordinal) + " (" + prop.name + ")";
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaStreamCreateWithFlags(&d->theStream, cudaStreamNonBlocking),
                "cudaStreamCreate"));
  LOOM_RETURN_IF_ERROR(
      cublasCheck(cublasLtCreate(&d->ltHandle), "cublasLtCreate"));
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaMalloc(&d->workspace, kGemmWorkspaceBytes),
                                 "cudaMalloc (GEMM workspace)"));
  MemoryLedger::device().add(kGemmWorkspaceBytes);
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaMalloc(reinterpret_cast<void **>(&d->record),
                           sizeof(DataCheckRecord)),
                "cudaMalloc (check record)"));
  MemoryLedger::device().add(sizeof(DataCheckRecord));
  // Everything touching the record goes through the stream: it does not
  // synchronise with the legacy default stream.
  LOOM_RETURN_IF_ERROR(cudaCheck(
      cudaMemsetAsync(d->record, 0, sizeof(DataCheckRecord), d->theStream),
      "cudaMemsetAsync"));
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaStreamSynchronize(d->theStream), "cudaStreamSynchronize"));
  return d;
}

CudaDevice::~CudaDevice() {
  // Errors cannot be reported from here; a failed teardown only leaks.
  if (theStream)
    cudaStreamSynchronize(theStream);
  MemoryLedger &ledger = MemoryLedger::device();
  if (record) {
    cudaFree(record);
    ledger.remove(sizeof(DataCheckRecord));
  }
  if (workspace) {
    cudaFree(workspace);
    ledger.remove(kGemmWorkspaceBytes);
  }
  for (SharedWorkspace *w : {&attn, &gemmPad})
    if (w->p) {
      cudaFree(w->p);
      ledger.remove(w->bytes);
    }
  if (ltHandle)
    cublasLtDestroy(ltHandle);
  if (theStream)
    cudaStreamDestroy(theStream);
}

const KernelDef *CudaDevice::findKernel(std::string_view name) const {
  return findCudaKernel(name);
}

StatusOr<uint8_t *> CudaDevice::allocateArena(int64_t bytes) {
  if (bytes < 0)
    return makeError("negative arena size %lld", (long long)bytes);
  void *p = nullptr;
  // cudaMalloc aligns to 256 bytes, more than the plan's 64.
  size_t n = static_cast<size_t>(bytes > 0 ? bytes : 1);
  if (Status s = cudaCheck(cudaMalloc(&p, n), "cudaMalloc"); !s)
    return makeError("cannot allocate an arena of %lld bytes on %s: %s",
                     (long long)bytes, deviceName.c_str(), s.message().c_str());
  MemoryLedger::device().add(static_cast<int64_t>(n));
  {
    std::lock_guard<std::mutex> lock(arenasMutex);
    arenas.push_back({static_cast<uint8_t *>(p), static_cast<int64_t>(n)});
  }
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaMemsetAsync(p, 0, n, theStream), "cudaMemsetAsync"));
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaStreamSynchronize(theStream), "cudaStreamSynchronize"));
  return static_cast<uint8_t *>(p);
}

void CudaDevice::freeArena(uint8_t *arena) {
  cudaStreamSynchronize(theStream);
  cudaFree(arena);
  std::lock_guard<std::mutex> lock(arenasMutex);
  for (auto it = arenas.begin(); it != arenas.end(); ++it)
    if (it->first == arena) {
      MemoryLedger::device().remove(it->second);
      arenas.erase(it);
      break;
    }
}

Status CudaDevice::upload(uint8_t *deviceDst, const uint8_t *hostSrc,
                          int64_t bytes) {
  if (bytes <= 0)
    return Status::ok();
  // From pageable memory the call returns once the source has been staged,
  // so the host bytes may change afterwards.
  return cudaCheck(cudaMemcpyAsync(deviceDst, hostSrc, bytes,
                                   cudaMemcpyHostToDevice, theStream),
                   "cudaMemcpyAsync (host to device)");
}

Status CudaDevice::download(uint8_t *hostDst, const uint8_t *deviceSrc,
                            int64_t bytes) {
  if (bytes <= 0)
    return Status::ok();
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaMemcpyAsync(hostDst, deviceSrc, bytes,
                                cudaMemcpyDeviceToHost, theStream),
                "cudaMemcpyAsync (device to host)"));
  return cudaCheck(cudaStreamSynchronize(theStream), "cudaStreamSynchronize");
}

Status CudaDevice::synchronize() {
  // The record's download is queued after every kernel of the step and
  // synchronises the stream, so it also surfaces their execution errors.
  DataCheckRecord r;
  LOOM_RETURN_IF_ERROR(download(reinterpret_cast<uint8_t *>(&r),
                                reinterpret_cast<const uint8_t *>(record),
                                sizeof(r)));
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaGetLastError(), "a kernel launch"));
  if (r.check == 0)
    return Status::ok();
  // Cleared on the stream, so before any later kernel can report again.
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaMemsetAsync(record, 0, sizeof(DataCheckRecord), theStream),
                "cudaMemsetAsync"));
  std::string format;
  {
    std::lock_guard<std::mutex> lock(checksMutex);
    if (r.check < 1 || r.check > static_cast<int>(checkFormats.size()))
      return makeError("a kernel reported unknown data check %d", r.check);
    format = checkFormats[r.check - 1];
  }
  char text[512];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  std::snprintf(text, sizeof(text), format.c_str(), r.position, r.value,
                r.limit);
#pragma GCC diagnostic pop
  return Status::error(text);
}

StatusOr<DeviceBuffer> CudaDevice::allocateWorkspace(int64_t bytes) {
  void *p = nullptr;
  int64_t n = bytes > 0 ? bytes : 1;
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaMalloc(&p, static_cast<size_t>(n)),
                                 "cudaMalloc (kernel workspace)"));
  MemoryLedger::device().add(n);
  cudaStream_t s = theStream;
  // Drop it only after queued kernels that may use it have finished.
  return DeviceBuffer(p, [s, n](void *q) {
    cudaStreamSynchronize(s);
    cudaFree(q);
    MemoryLedger::device().remove(n);
  });
}

int64_t CudaDevice::usedMemoryBytes() const {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<int64_t>(total - free);
}

Status CudaDevice::reserveAttentionWorkspace(int64_t bytes) {
  return reserve(attn, bytes, "attention");
}

Status CudaDevice::reserveGemmPadWorkspace(int64_t bytes) {
  return reserve(gemmPad, bytes, "padded GEMM");
}

Status CudaDevice::reserve(SharedWorkspace &w, int64_t bytes,
                           const char *what) {
  std::lock_guard<std::mutex> lock(w.mutex);
  if (bytes <= w.bytes)
    return Status::ok();
  int64_t had = w.bytes;
  if (w.p) {
    // Steps already enqueued may still use the old buffer.
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaStreamSynchronize(theStream), "cudaStreamSynchronize"));
    cudaFree(w.p);
    MemoryLedger::device().remove(w.bytes);
    w.p = nullptr;
    w.bytes = 0;
  }
  Status s = cudaCheck(cudaMalloc(&w.p, bytes), "cudaMalloc (workspace)");
  if (s.isOk()) {
    w.bytes = bytes;
    MemoryLedger::device().add(bytes);
    return Status::ok();
  }
  // An allocation failure is not sticky: clear it, so that the next
  // `synchronize` does not report it, and give the instructions bound
  // before their workspace back (they check its size when they run).
  cudaGetLastError();
  w.p = nullptr;
  if (had > 0 && cudaMalloc(&w.p, had) == cudaSuccess) {
    w.bytes = had;
    MemoryLedger::device().add(had);
  } else
    cudaGetLastError();
  return makeError("cannot allocate the %s workspace of %lld MiB on %s: %s",
                   what, (long long)(bytes >> 20), deviceName.c_str(),
                   s.message().c_str());
}

int CudaDevice::registerCheck(const std::string &context,
                              const std::string &format) {
  std::string escaped; // `context` holds user text (locs): no conversions
  for (char c : context) {
    escaped += c;
    if (c == '%')
      escaped += '%';
  }
  std::lock_guard<std::mutex> lock(checksMutex);
  checkFormats.push_back(escaped + ": " + format);
  return static_cast<int>(checkFormats.size());
}

} // namespace loom::runtime::cuda
