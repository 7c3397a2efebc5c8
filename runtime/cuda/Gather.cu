//===- Gather.cu - gather_grad without float atomics -------------*- CUDA
//-*-===//
//
// `dx[p, idx[i], q] += dy[p, i, q]` with repeated indices (an embedding's
// frequent tokens) must not depend on thread timing, so there are no float
// atomics: (index, position) pairs are sorted by index with CUB's radix
// sort, which is stable, so each index's positions stay in ascending order;
// the first position of each run of equal indices then sums its run in that
// order, the CPU kernel's order. Cost: one sort of `count` 32-bit pairs per
// step (a few microseconds for a GPT-2 batch) instead of a scan of all
// indices per row of `dx`.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"

#ifndef LOOM_CUDA_HOST_EMULATION
#include <cub/device/device_radix_sort.cuh>
#endif

namespace loom::runtime::cuda {

namespace {

/// Resolves negative indices; an index outside `[-dim, dim)` is recorded and
/// gets the key `dim`, which sorts last and is skipped.
__global__ void gatherKeysKernel(const int64_t *__restrict__ indices,
                                 int64_t count, int64_t dim,
                                 int32_t *__restrict__ keys,
                                 int32_t *__restrict__ positions, int check,
                                 DataCheckRecord *rec) {
  LOOM_GRID_STRIDE(i, count) {
    int64_t raw = indices[i];
    int64_t r = raw < 0 ? raw + dim : raw;
    if (r < 0 || r >= dim) {
      reportCheck(rec, check, i, raw, dim);
      r = dim;
    }
    keys[i] = static_cast<int32_t>(r);
    positions[i] = static_cast<int32_t>(i);
  }
}

/// One block per sorted position; the block of a run's first position
/// writes that row of `dx` for every `p`, its threads over `q`.
__global__ void gatherGradRunsKernel(FloatIn dy, FloatOut dx,
                                     const int32_t *__restrict__ keys,
                                     const int32_t *__restrict__ positions,
                                     GatherDims g) {
  for (int64_t s = blockIdx.x; s < g.count; s += gridDim.x) {
    int32_t key = keys[s];
    if (key >= g.dim || (s > 0 && keys[s - 1] == key))
      continue;
    int64_t end = s + 1;
    while (end < g.count && keys[end] == key)
      ++end;
    for (int64_t p = 0; p < g.pre; ++p)
      for (int64_t q = threadIdx.x; q < g.post; q += blockDim.x) {
        float acc = 0.0f;
        for (int64_t t = s; t < end; ++t)
          acc += load(dy, (p * g.count + positions[t]) * g.post + q);
        store(dx, (p * g.dim + key) * g.post + q, acc);
      }
  }
}

/// gather_elements: one thread per output element.
__global__ void gatherElementsKernel(FloatIn data,
                                     const int64_t *__restrict__ indices,
                                     FloatOut y, ElementsDims g, int check,
                                     DataCheckRecord *rec) {
  LOOM_GRID_STRIDE(t, g.outer * g.count * g.inner) {
    int64_t i = t % g.inner, o = t / (g.count * g.inner);
    int64_t raw = indices[t];
    int64_t r = raw < 0 ? raw + g.dim : raw;
    if (r < 0 || r >= g.dim) {
      reportCheck(rec, check, t, raw, g.dim);
      store(y, t, 0.0f);
    } else {
      store(y, t, load(data, (o * g.dim + r) * g.inner + i));
    }
  }
}

/// gather_elements_grad: one thread per (o, i) column of `dx`, which it
/// alone writes, adding its positions j in order (the CPU kernel's order);
/// `dx` is zero before.
__global__ void gatherElementsGradKernel(FloatIn dy,
                                         const int64_t *__restrict__ indices,
                                         FloatOut dx, FloatIn dxRead,
                                         ElementsDims g, int check,
                                         DataCheckRecord *rec) {
  LOOM_GRID_STRIDE(c, g.outer * g.inner) {
    int64_t o = c / g.inner, i = c % g.inner;
    for (int64_t j = 0; j < g.count; ++j) {
      int64_t t = (o * g.count + j) * g.inner + i;
      int64_t raw = indices[t];
      int64_t r = raw < 0 ? raw + g.dim : raw;
      if (r < 0 || r >= g.dim) {
        reportCheck(rec, check, t, raw, g.dim);
        continue;
      }
      int64_t k = (o * g.dim + r) * g.inner + i;
      store(dx, k, load(dxRead, k) + load(dy, t));
    }
  }
}

/// Row `r`'s first element in the data, or -1 (recorded) for a bad index.
__device__ __forceinline__ int64_t ndRowOffset(const int64_t *indices,
                                               const NdDims &g, int64_t r,
                                               int check,
                                               DataCheckRecord *rec) {
  int64_t off = 0;
  for (int j = 0; j < g.k; ++j) {
    int64_t raw = indices[r * g.k + j], dim = g.dims[j];
    int64_t v = raw < 0 ? raw + dim : raw;
    if (v < 0 || v >= dim) {
      reportCheck(rec, check, r * g.k + j, raw, dim);
      return -1;
    }
    off = off * dim + v;
  }
  return off * g.slice;
}

/// scatter_nd after the copy of the data: one thread per element of a
/// slice, applying the rows in order (repeated rows: the CPU kernel's
/// result, no atomics).
__global__ void scatterNdKernel(const int64_t *__restrict__ indices,
                                FloatIn updates, FloatOut y, FloatIn yRead,
                                NdDims g, int mode, int check,
                                DataCheckRecord *rec) {
  LOOM_GRID_STRIDE(e, g.slice) {
    for (int64_t r = 0; r < g.rows; ++r) {
      int64_t off = ndRowOffset(indices, g, r, check, rec);
      if (off < 0)
        continue;
      float u = load(updates, r * g.slice + e);
      float v = mode == 0   ? u
                : mode == 1 ? load(yRead, off + e) + u
                            : load(yRead, off + e) * u;
      store(y, off + e, v);
    }
  }
}

/// gather_nd: one thread per output element; a bad row reads zeros.
__global__ void gatherNdKernel(FloatIn data, const int64_t *__restrict__ indices,
                               FloatOut y, NdDims g, int check,
                               DataCheckRecord *rec) {
  LOOM_GRID_STRIDE(t, g.rows * g.slice) {
    int64_t off = ndRowOffset(indices, g, t / g.slice, check, rec);
    store(y, t, off < 0 ? 0.0f : load(data, off + t % g.slice));
  }
}

/// y = data, element by element (either may be bf16).
__global__ void ndCopyKernel(FloatIn data, FloatOut y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) { store(y, i, load(data, i)); }
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchScatterNd(FloatIn data, const int64_t *indices, FloatIn updates,
                       FloatOut y, int64_t n, const NdDims &g, int mode,
                       int check, DataCheckRecord *record,
                       cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  ndCopyKernel<<<blocksFor(n), kThreads, 0, stream>>>(data, y, n);
  LOOM_RETURN_IF_ERROR(launchCheck("scatter_nd copy kernel"));
  if (g.rows == 0 || g.slice == 0)
    return Status::ok();
  scatterNdKernel<<<blocksFor(g.slice), kThreads, 0, stream>>>(
      indices, updates, y, FloatIn{y.p, y.e}, g, mode, check, record);
  return launchCheck("scatter_nd kernel");
}

Status launchGatherNd(FloatIn data, const int64_t *indices, FloatOut y,
                      const NdDims &g, int check, DataCheckRecord *record,
                      cudaStream_t stream) {
  int64_t n = g.rows * g.slice;
  if (n == 0)
    return Status::ok();
  gatherNdKernel<<<blocksFor(n), kThreads, 0, stream>>>(data, indices, y, g,
                                                        check, record);
  return launchCheck("gather_nd kernel");
}

Status launchGatherElements(FloatIn data, const int64_t *indices, FloatOut y,
                            const ElementsDims &g, int check,
                            DataCheckRecord *record, cudaStream_t stream) {
  int64_t n = g.outer * g.count * g.inner;
  if (n == 0)
    return Status::ok();
  gatherElementsKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      data, indices, y, g, check, record);
  return launchCheck("gather_elements kernel");
}

Status launchGatherElementsGrad(FloatIn dy, const int64_t *indices,
                                FloatOut dx, const ElementsDims &g, int check,
                                DataCheckRecord *record, cudaStream_t stream) {
  LOOM_RETURN_IF_ERROR(
      launchZero(dx.p, g.outer * g.dim * g.inner * elemBytes(dx.e), stream));
  int64_t columns = g.outer * g.inner;
  if (columns == 0 || g.count == 0)
    return Status::ok();
  gatherElementsGradKernel<<<blocksFor(columns), kThreads, 0, stream>>>(
      dy, indices, dx, FloatIn{dx.p, dx.e}, g, check, record);
  return launchCheck("gather_elements_grad kernel");
}

namespace {

int keyBits(int64_t dim) {
  int bits = 1;
  while ((int64_t(1) << bits) <= dim) // keys go up to `dim` itself
    ++bits;
  return bits;
}

int64_t alignUp(int64_t v) { return (v + 255) / 256 * 256; }

/// Sort temporary storage, then four arrays of `count` int32s.
struct GradLayout {
  int64_t sortBytes, arrayBytes, total;
};

StatusOr<GradLayout> gradLayout(const GatherDims &g) {
  if (g.count > INT32_MAX || g.dim >= INT32_MAX)
    return makeError("gather_grad on CUDA takes fewer than 2^31 indices and "
                     "rows, got %lld indices into %lld rows",
                     (long long)g.count, (long long)g.dim);
  size_t sortBytes = 0;
  int n = static_cast<int>(g.count);
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cub::DeviceRadixSort::SortPairs(
                    nullptr, sortBytes, static_cast<const int32_t *>(nullptr),
                    static_cast<int32_t *>(nullptr),
                    static_cast<const int32_t *>(nullptr),
                    static_cast<int32_t *>(nullptr), n, 0, keyBits(g.dim)),
                "cub::DeviceRadixSort::SortPairs (size query)"));
  GradLayout l;
  l.sortBytes = alignUp(static_cast<int64_t>(sortBytes));
  l.arrayBytes = alignUp(g.count * int64_t(sizeof(int32_t)));
  l.total = l.sortBytes + 4 * l.arrayBytes;
  return l;
}

} // namespace

StatusOr<int64_t> gatherGradWorkspace(const GatherDims &g) {
  LOOM_ASSIGN_OR_RETURN(GradLayout l, gradLayout(g));
  return l.total;
}

Status launchGatherGrad(FloatIn dy, const int64_t *indices, FloatOut dx,
                        const GatherDims &g, void *workspace,
                        int64_t workspaceBytes, int check,
                        DataCheckRecord *record, cudaStream_t stream) {
  LOOM_RETURN_IF_ERROR(
      launchZero(dx.p, g.pre * g.dim * g.post * elemBytes(dx.e), stream));
  if (g.count == 0)
    return Status::ok();
  LOOM_ASSIGN_OR_RETURN(GradLayout l, gradLayout(g));
  if (l.total > workspaceBytes)
    return makeError("gather_grad workspace of %lld bytes is smaller than "
                     "the %lld it needs",
                     (long long)workspaceBytes, (long long)l.total);
  char *base = static_cast<char *>(workspace);
  void *sortTemp = base;
  auto array = [&](int k) {
    return reinterpret_cast<int32_t *>(base + l.sortBytes + k * l.arrayBytes);
  };
  int32_t *keysIn = array(0), *keysOut = array(1), *posIn = array(2),
          *posOut = array(3);
  gatherKeysKernel<<<blocksFor(g.count), kThreads, 0, stream>>>(
      indices, g.count, g.dim, keysIn, posIn, check, record);
  LOOM_RETURN_IF_ERROR(launchCheck("gather_grad index kernel"));
  size_t sortBytes = static_cast<size_t>(l.sortBytes);
  LOOM_RETURN_IF_ERROR(cudaCheck(
      cub::DeviceRadixSort::SortPairs(sortTemp, sortBytes, keysIn, keysOut,
                                      posIn, posOut, static_cast<int>(g.count),
                                      0, keyBits(g.dim), stream),
      "cub::DeviceRadixSort::SortPairs"));
  if (g.pre * g.post == 0)
    return Status::ok();
  gatherGradRunsKernel<<<capBlocks(g.count), kThreads, 0, stream>>>(
      dy, dx, keysOut, posOut, g);
  return launchCheck("gather_grad kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
