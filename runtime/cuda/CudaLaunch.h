//===- CudaLaunch.h - Host entry points of the CUDA kernels -------*- C++
//-*-===//
//
// The `.cu` files hold only kernels and these launchers; the `bind`
// functions (plain C++, CudaKernels.cpp) resolve shapes and attributes once
// and call a launcher per step. Launchers enqueue on `stream` and return the
// launch error (execution errors surface at the next synchronize).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDALAUNCH_H
#define LOOM_RUNTIME_CUDA_CUDALAUNCH_H

#include "runtime/cuda/CudaDevice.h"

#include <cstdint>

namespace loom::runtime::cuda {

/// Most dims a broadcast or reduction index handles (more fail at bind).
constexpr int kMaxDims = 8;

/// How a floating-point operand is stored. Math is always fp32: `BF16`
/// values (bfloat16, round-to-nearest-even on store) are widened on load.
/// Each operand carries its own storage, so one kernel serves bf16
/// activations next to fp32 parameters (a bias add, a norm's scale); the
/// branch on it is uniform over a launch, so it costs no divergence.
enum class Elem : uint8_t { F32, BF16 };

/// A read-only / written floating-point operand.
struct FloatIn {
  const void *p = nullptr;
  Elem e = Elem::F32;
};
struct FloatOut {
  void *p = nullptr;
  Elem e = Elem::F32;
};

/// Bytes of one element of `e`.
inline int64_t elemBytes(Elem e) { return e == Elem::BF16 ? 2 : 4; }

enum class BinaryOp { Add, Sub, Mul, Div, Pow, Max, Min, Equal, Less, LessEqual };
enum class UnaryOp {
  Relu,
  Tanh,
  Sigmoid,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Neg,
  Reciprocal,
  Erf,
  Sin,
  Cos,
  RoundF16,
  Trunc,
  Gelu,
  GeluTanh
};
/// `dx = dy * f'(.)`; the second operand is `x` for relu and gelu, the
/// forward output `y` for tanh and sigmoid (docs/plan-format.md).
enum class UnaryGradOp { Relu, Tanh, Sigmoid, Gelu, GeluTanh };

/// How `a` and `b` reach the output: `Same` (both have the output's
/// elements), `ScalarB`, `ScalarA`, or `General` (strided, below).
enum class BroadcastMode { Same, ScalarB, ScalarA, General };

/// Output dims and each operand's element stride per output dim (0 where
/// broadcast).
struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strideA[kMaxDims] = {};
  int64_t strideB[kMaxDims] = {};
};

/// `sum_to` and the `reduce_*` ops: output element `j` (row-major over
/// `kept` dims) reduces the input at `base(j) + offset(k)` for `k` in
/// `[0, reduced)` (row-major over `red` dims); strides are the input's.
struct SumToIndex {
  int keptRank = 0, redRank = 0;
  int64_t keptDims[kMaxDims] = {}, keptStrides[kMaxDims] = {};
  int64_t redDims[kMaxDims] = {}, redStrides[kMaxDims] = {};
  int64_t reduced = 1;
};

enum class ReduceKind { Sum, Mean, Max };

Status launchBinary(BinaryOp op, BroadcastMode mode, FloatIn a, FloatIn b,
                    FloatOut c, int64_t n, const BroadcastIndex &index,
                    cudaStream_t stream);
Status launchUnary(UnaryOp op, FloatIn x, FloatOut y, int64_t n,
                   cudaStream_t stream);
Status launchUnaryGrad(UnaryGradOp op, FloatIn dy, FloatIn xy, FloatOut dx,
                       int64_t n, cudaStream_t stream);
/// Every one of the `rows` rows of `c` (`cols` wide) becomes `row`.
Status launchFillRows(FloatOut c, FloatIn row, int64_t rows, int64_t cols,
                      cudaStream_t stream);
/// `y = x * factor` (in place allowed).
Status launchScale(FloatIn x, FloatOut y, int64_t n, float factor,
                   cudaStream_t stream);
/// Row chunks of the two-pass reduction `launchReduce` uses for `ny`
/// outputs over `index` (0: one pass). Two passes for a dense
/// `[rows, cols] -> [cols]` (bias gradients: column slabs read as 16-byte
/// packs, RowVec.cuh) and when the innermost input dim is kept and the sums
/// are long: chunk partials first, then the chunks in order
/// (deterministic).
int64_t reduceChunks(int64_t ny, const SumToIndex &index);
/// `y` has `ny` elements; `x` is read through `index`. `Sum` is `sum_to`.
/// `partials` holds `reduceChunks(ny, index) * ny` floats (null when 0).
Status launchReduce(ReduceKind kind, FloatIn x, FloatOut y, int64_t ny,
                    const SumToIndex &index, float *partials,
                    cudaStream_t stream);

/// Cross-entropy of `rows` rows of `classes` logits summed and divided by
/// `count` (the rows of the whole batch); `rowLoss` is `rows` floats of
/// workspace. A target outside `[0, classes)` is recorded
/// in `record` with id `check` (row, value, classes) and contributes 0.
Status launchCrossEntropy(FloatIn logits, const int64_t *target, float *loss,
                          int64_t rows, int64_t classes, int64_t count,
                          float *rowLoss, int check, DataCheckRecord *record,
                          cudaStream_t stream);
/// `(softmax - onehot) / count` per row.
Status launchCrossEntropyGrad(FloatIn logits, const int64_t *target,
                              FloatOut grad, int64_t rows, int64_t classes,
                              int64_t count, int check,
                              DataCheckRecord *record, cudaStream_t stream);
/// Number of partial sums `launchMse` needs as workspace (doubles).
int64_t msePartials(int64_t n);
/// The sum of `n` squared differences divided by `count`.
Status launchMse(const float *pred, const float *target, float *loss, int64_t n,
                 int64_t count, double *partials, cudaStream_t stream);
/// `grad = factor * (pred - target)`.
Status launchMseGrad(const float *pred, const float *target, float *grad,
                     int64_t n, float factor, cudaStream_t stream);

struct SgdArgs {
  float lr, weightDecay, momentum, keep; // keep = 1 - dampening
  bool nesterov, first;
};
Status launchSgd(float *p, const float *g, float *buf, int64_t n,
                 const SgdArgs &args, cudaStream_t stream);
/// Scalars as the CPU kernel computes them for step t (host side).
struct AdamWArgs {
  float decay, w1, b2, w2, stepSize, bc2Sqrt, eps;
};
/// Parameters and state are fp32; the gradient may be bf16.
Status launchAdamW(float *p, FloatIn g, float *m, float *v, int64_t n,
                   const AdamWArgs &args, cudaStream_t stream);

/// Softmax of `x` viewed as `[outer, dim, inner]` along `dim`.
Status launchSoftmax(FloatIn x, FloatOut y, int64_t outer, int64_t dim,
                     int64_t inner, cudaStream_t stream);
/// `dx = y * (dy - sum(dy * y))` along `dim`.
Status launchSoftmaxGrad(FloatIn dy, FloatIn y, FloatOut dx, int64_t outer,
                         int64_t dim, int64_t inner, cudaStream_t stream);
/// Layer norm (or RMS norm with `rms`) of `rows` contiguous rows of `cols`.
/// `bias.p` may be null.
Status launchLayerNorm(FloatIn x, FloatIn scale, FloatIn bias, FloatOut y,
                       int64_t rows, int64_t cols, float eps, bool rms,
                       cudaStream_t stream);
/// Row chunks of `launchLayerNormGrad`'s dscale / dbias sums (at least 1):
/// chunk partials over rows, then the chunks in order.
int64_t layerNormGradChunks(int64_t rows, int64_t cols);
/// `dx` per row; `dscale` (and `dbias` unless its pointer is null) summed
/// over rows. `stats` is `2 * rows` floats of workspace (mean and rstd),
/// `partials` `2 * layerNormGradChunks(rows, cols) * cols` doubles.
Status launchLayerNormGrad(FloatIn dy, FloatIn x, FloatIn scale, FloatOut dx,
                           FloatOut dscale, FloatOut dbias, int64_t rows,
                           int64_t cols, float eps, bool rms, float *stats,
                           double *partials, cudaStream_t stream);

// --- Layout.cu
// ----------------------------------------------------------------

/// A strided copy `dst[dstOffset(i)] = src[srcOffset(i)]` for every `i` in
/// row-major order over `dims`; offsets are in elements (transpose, expand,
/// slice, slice_grad, concat).
struct CopyIndex {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t srcStride[kMaxDims] = {};
  int64_t dstStride[kMaxDims] = {};
};
Status launchStridedCopy(FloatIn src, FloatOut dst, int64_t n,
                         const CopyIndex &index, cudaStream_t stream);
/// slice_grad of a window of whole rows: `dx` is `[rows, rowLen]`, zero
/// except columns `[start, start + len)`, which are `dy` (`[rows, len]`).
/// One pass writes every element of `dx` (no separate zeroing).
Status launchPadRows(FloatIn dy, FloatOut dx, int64_t rows, int64_t rowLen,
                     int64_t start, int64_t len, cudaStream_t stream);
/// The innermost-dims swap: for each of `batch` entries `o` (row-major over
/// `outer.dims`, source offsets `outer.srcStride`), `dst[o][i][j] =
/// src[base(o) + j * ldSrc + i]` for `i < a`, `j < b` (dst dense), through
/// 32x32 shared-memory tiles so both sides are coalesced.
Status launchTranspose2d(FloatIn src, FloatOut dst, int64_t batch, int64_t a,
                         int64_t b, int64_t ldSrc, const CopyIndex &outer,
                         cudaStream_t stream);
/// Zeros `bytes` bytes.
Status launchZero(void *p, int64_t bytes, cudaStream_t stream);
/// Writes `count` dense row-major `[dstRows, dstCols]` matrices of
/// `elemBytes`-byte (2 or 4) elements at `dst` from `count` dense
/// `[srcRows, srcCols]` ones at `src`: each element the source has, zero
/// elsewhere (a padded copy with a zeroed pad, or the real region of one;
/// PaddedCopy.cu).
Status launchPaddedCopy(void *dst, int64_t dstCols, int64_t dstRows,
                        const void *src, int64_t srcCols, int64_t srcRows,
                        int64_t count, int64_t elemBytes, cudaStream_t stream);
/// Every element of `y` becomes `value`.
Status launchFill(FloatOut y, int64_t n, float value, cudaStream_t stream);
/// `y = cond != 0 ? a : b`, each operand through its strides over `dims`
/// (`index.strideA` = a, `strideB` = b, `strideC` = cond).
struct SelectIndex {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strideCond[kMaxDims] = {}, strideA[kMaxDims] = {},
          strideB[kMaxDims] = {};
};
Status launchSelect(FloatIn cond, FloatIn a, FloatIn b, FloatOut y, int64_t n,
                    const SelectIndex &index, cudaStream_t stream);
/// `y = float(x)` from i64 (`xI64`) or a float storage, to a float storage.
/// f32 holding integers to i64, rounding to nearest.
Status launchConvertToI64(FloatIn x, int64_t *y, int64_t n,
                          cudaStream_t stream);
Status launchConvert(const int64_t *xI64, FloatIn x, FloatOut y, int64_t n,
                     cudaStream_t stream);

/// A gather over `[pre, dim, post]` data with `count` indices (negative
/// ones count from the end). An index outside `[-dim, dim)` is recorded
/// with id `check` (position, index, dim); its rows are written as zeros.
struct GatherDims {
  int64_t pre, dim, post, count;
};
Status launchGather(FloatIn data, const int64_t *indices, FloatOut y,
                    const GatherDims &g, int check, DataCheckRecord *record,
                    cudaStream_t stream);
/// Workspace bytes `launchGatherGrad` needs.
StatusOr<int64_t> gatherGradWorkspace(const GatherDims &g);
/// `dx = 0; dx[p, idx[i], q] += dy[p, i, q]`, deterministically: indices are
/// sorted (stable radix sort of (index, position) pairs) and each row of
/// `dx` sums its run of positions in order. No float atomics.
Status launchGatherGrad(FloatIn dy, const int64_t *indices, FloatOut dx,
                        const GatherDims &g, void *workspace,
                        int64_t workspaceBytes, int check,
                        DataCheckRecord *record, cudaStream_t stream);

/// A gather_elements of `[outer, dim, inner]` data with `[outer, count,
/// inner]` indices (negative ones count from the end); a bad index is
/// recorded with id `check` (position, index, dim), its element written as
/// zero (forward) or skipped (gradient).
struct ElementsDims {
  int64_t outer, dim, count, inner;
};
Status launchGatherElements(FloatIn data, const int64_t *indices, FloatOut y,
                            const ElementsDims &g, int check,
                            DataCheckRecord *record, cudaStream_t stream);
/// `dx = 0; dx[o, idx[o, j, i], i] += dy[o, j, i]`, each column of `dx` by
/// one thread in the order of j: deterministic, no atomics.
Status launchGatherElementsGrad(FloatIn dy, const int64_t *indices,
                                FloatOut dx, const ElementsDims &g, int check,
                                DataCheckRecord *record, cudaStream_t stream);

/// scatter_nd / gather_nd: rows of `k` indices into the first `k` of the
/// data's dimensions (`dims`), each naming a slice of `slice` elements.
struct NdDims {
  int k = 0;
  int64_t rows = 0, slice = 0;
  int64_t dims[kMaxDims] = {};
};
/// `y = data`, then each row's slice of `updates` replaces (mode 0), adds to
/// (1) or multiplies (2) its slice of `y`, rows in order; a bad index is
/// recorded with id `check` and its row skipped.
Status launchScatterNd(FloatIn data, const int64_t *indices, FloatIn updates,
                       FloatOut y, int64_t n, const NdDims &g, int mode,
                       int check, DataCheckRecord *record,
                       cudaStream_t stream);
/// `y[r, e] = data[row r's slice][e]`; a bad row is recorded and reads zeros.
Status launchGatherNd(FloatIn data, const int64_t *indices, FloatOut y,
                      const NdDims &g, int check, DataCheckRecord *record,
                      cudaStream_t stream);

// --- Attention.cu
// -------------------------------------------------------------

/// `batch` independent attentions (all leading dims): q `[Sq, D]`,
/// k `[Sk, D]`, v `[Sk, Dv]` per entry, all of one storage `e`.
struct AttentionDims {
  int64_t batch, sq, sk, d, dv;
  float scale;
  bool causal;
};
/// Largest `D` / `Dv` the kernels take (registers hold a row slice).
constexpr int64_t kMaxAttentionHeadDim = 128;
/// `o = softmax(scale q k^T (causal mask)) v`, flash style: K/V tiles in
/// shared memory, online softmax, no score matrix in global memory.
Status launchAttention(Elem e, const void *q, const void *k, const void *v,
                       void *o, const AttentionDims &a, cudaStream_t stream);
/// Allows the flash kernels that `a` selects their dynamic shared memory;
/// once at bind, before `launchAttention` / `launchAttentionGrad`.
Status prepareAttentionKernels(Elem e, const AttentionDims &a);
/// dq, dk, dv from do, q, k, v: a first pass recomputes each query row's
/// logsumexp and `rowsum(dO * O)`, then one kernel accumulates dK/dV per
/// key tile and one dQ per query tile (deterministic, no atomics).
Status launchAttentionGrad(Elem e, const void *dO, const void *q, const void *k,
                           const void *v, void *dq, void *dk, void *dv,
                           const AttentionDims &a, float *workspace,
                           cudaStream_t stream);

// --- AttentionTc.cu
// -------------------------------------------------------------

/// Allows the tensor-core kernels of `a`'s head dim their dynamic shared
/// memory; once at bind, before the launches below.
Status prepareTcAttentionKernels(const AttentionDims &a);
/// `launchAttention` on the tensor cores (mma.sync, bf16 operands, f32
/// accumulation); `a` must satisfy runtime/Workspace.h's
/// `attentionTakesTensorCorePath` and every operand be 16-byte aligned.
Status launchTcAttention(const void *q, const void *k, const void *v, void *o,
                         const AttentionDims &a, cudaStream_t stream);
/// `launchAttentionGrad` on the tensor cores, deterministic: statistics
/// pass, one kernel for dK/dV per key tile, one for dQ per query tile.
Status launchTcAttentionGrad(const void *dO, const void *q, const void *k,
                             const void *v, void *dq, void *dk, void *dv,
                             const AttentionDims &a, float *workspace,
                             cudaStream_t stream);

// --- AttentionGemm.cu
// ---------------------------------------------------------

/// The row kernels of the GEMM path of attention over `rows` rows of `sk`
/// scores (`rows` = batch x Sq; with `causal`, key j of query row r is
/// masked when j > r % sq). `p = softmax(s)` per row, masked entries 0;
/// `s` is f32, `p` has storage `e`.
Status launchAttentionSoftmax(Elem e, const float *s, void *p, int64_t rows,
                              int64_t sq, int64_t sk, bool causal,
                              cudaStream_t stream);
/// `ds = p * (dp - rowsum(dp * p))` per row, masked entries 0; `p` and `ds`
/// have storage `e` (and may be the same buffer), `dp` is f32.
Status launchAttentionSoftmaxGrad(Elem e, const void *p, const float *dp,
                                  void *ds, int64_t rows, int64_t sq,
                                  int64_t sk, bool causal, cudaStream_t stream);

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDALAUNCH_H
