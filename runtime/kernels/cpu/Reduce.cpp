//===- Reduce.cpp - reduce_sum, reduce_mean, reduce_max ---------*- C++ -*-===//
//
// The input's dimensions are merged into alternating kept / reduced groups
// (size-1 dimensions dropped). When the innermost group is reduced, each
// output element reduces contiguous runs (threads over output elements);
// when it is kept, each output row accumulates whole input rows (threads
// over blocks of output columns).
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::runtime::cpu {

namespace {

enum class ReduceKind { Sum, Mean, Max };

struct Group {
  int64_t size, stride; // stride in input elements
  bool reduced;
};

/// Mixed-radix offsets: index `i` over `dims` (outermost first) to an input
/// offset.
int64_t offsetOf(int64_t i, const std::vector<Group> &dims) {
  int64_t off = 0;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    off += (i % dims[d].size) * dims[d].stride;
    i /= dims[d].size;
  }
  return off;
}

StatusOr<std::vector<int64_t>> reducedShape(const OpView &op) {
  std::vector<int64_t> xs = op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  LOOM_ASSIGN_OR_RETURN(bool keep, flagAttr(op, "keep_dims"));
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(xs.size()))
      return makeError("axis %lld is out of range for rank %zu",
                       (long long)axes[i], xs.size());
    if (i > 0 && axes[i - 1] >= axes[i])
      return makeError("axes must be sorted and unique");
  }
  std::vector<int64_t> out;
  size_t a = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    bool reduced = a < axes.size() && axes[a] == static_cast<int64_t>(d);
    if (reduced)
      ++a;
    if (!reduced)
      out.push_back(xs[d]);
    else if (keep)
      out.push_back(1);
  }
  return out;
}

float finish(double acc, ReduceKind kind, double count) {
  return static_cast<float>(kind == ReduceKind::Mean ? acc / count : acc);
}

/// Sum of `n` contiguous floats: float lanes per block of 1024, blocks added
/// in double.
double sumRun(const float *x, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 1024) {
    int64_t e = std::min(n, b + 1024);
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = b;
    for (; i + 8 <= e; i += 8)
      for (int l = 0; l < 8; ++l)
        lane[l] += x[i + l];
    float tail = 0;
    for (; i < e; ++i)
      tail += x[i];
    total += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
             ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
  }
  return total;
}

inline float maxOf(float m, float v) { return (v > m || v != v) ? v : m; }

float maxRun(const float *x, int64_t n, float m) {
  for (int64_t i = 0; i < n; ++i)
    m = maxOf(m, x[i]);
  return m;
}

} // namespace

Status verifyReduce(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> want, reducedShape(op));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  if (op.inst.op() == "reduce_max")
    for (int64_t a : axes)
      if (op.inShape(0)[a] == 0)
        return makeError("reduce_max over the empty axis %lld", (long long)a);
  return expectOutShape(op, 0, want, "output");
}

StatusOr<KernelFn> bindReduce(const OpView &op, BindContext &ctx) {
  const std::string &name = op.inst.op();
  ReduceKind kind = name == "reduce_sum"    ? ReduceKind::Sum
                    : name == "reduce_mean" ? ReduceKind::Mean
                                            : ReduceKind::Max;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  std::vector<int64_t> xs = op.inShape(0);
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t nx = numElements(xs), ny = op.outNumel(0);
  if (ny == 0)
    return noopKernel();
  double count = nx == 0 ? 0.0 : static_cast<double>(nx) / ny;
  float init =
      kind == ReduceKind::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
  if (nx == 0) // Sum over nothing is 0, the mean NaN (as in PyTorch).
    return KernelFn([=](const StepContext &) {
      float v = kind == ReduceKind::Mean ? std::nanf("") : init;
      for (int64_t i = 0; i < ny; ++i)
        y[i] = v;
      return Status::ok();
    });

  // Merge dims into alternating groups, outermost first.
  std::vector<Group> groups;
  int64_t stride = 1;
  std::vector<Group> rev;
  for (int d = static_cast<int>(xs.size()) - 1; d >= 0; --d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (xs[d] != 1) {
      if (!rev.empty() && rev.back().reduced == reduced)
        rev.back().size *= xs[d];
      else
        rev.push_back({xs[d], stride, reduced});
    }
    stride *= xs[d];
  }
  groups.assign(rev.rbegin(), rev.rend());
  std::vector<Group> kept, reducedOuter;
  bool innerReduced = !groups.empty() && groups.back().reduced;
  int64_t inner = 1;
  if (!groups.empty()) {
    inner = groups.back().size;
    groups.pop_back();
  }
  for (const Group &g : groups)
    (g.reduced ? reducedOuter : kept).push_back(g);
  int64_t combos = 1;
  for (const Group &g : reducedOuter)
    combos *= g.size;

  if (innerReduced) {
    // y[o] = reduce over combos c and t < inner of x[base(o) + off(c) + t].
    return KernelFn([=](const StepContext &) {
      auto reduceOne = [&](int64_t o) {
        const float *base = x + offsetOf(o, kept);
        if (kind == ReduceKind::Max) {
          float m = init;
          for (int64_t c = 0; c < combos; ++c)
            m = maxRun(base + offsetOf(c, reducedOuter), inner, m);
          return m;
        }
        double acc = 0;
        for (int64_t c = 0; c < combos; ++c)
          acc += sumRun(base + offsetOf(c, reducedOuter), inner);
        return finish(acc, kind, count);
      };
      if (ny == 1 && kind != ReduceKind::Max && nx >= kParallelThreshold) {
        double acc = 0;
        int64_t blocks = (inner + 4095) / 4096;
#pragma omp parallel for reduction(+ : acc) schedule(static)
        for (int64_t t = 0; t < combos * blocks; ++t) {
          int64_t c = t / blocks, b = (t % blocks) * 4096;
          acc += sumRun(x + offsetOf(c, reducedOuter) + b,
                        std::min<int64_t>(4096, inner - b));
        }
        y[0] = finish(acc, kind, count);
        return Status::ok();
      }
#pragma omp parallel for schedule(static) if (nx >= kParallelThreshold)
      for (int64_t o = 0; o < ny; ++o)
        y[o] = reduceOne(o);
      return Status::ok();
    });
  }

  // The innermost group is kept: output rows of `inner` columns accumulate
  // whole input rows; tasks are (output row, block of columns).
  const int64_t block = 512;
  int64_t rows = ny / inner, blocks = (inner + block - 1) / block;
  float scale =
      kind == ReduceKind::Mean ? static_cast<float>(1.0 / count) : 1.0f;
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (nx >= kParallelThreshold)
    for (int64_t t = 0; t < rows * blocks; ++t) {
      int64_t r = t / blocks, b = (t % blocks) * block;
      int64_t len = std::min(block, inner - b);
      float *py = y + r * inner + b;
      const float *base = x + offsetOf(r, kept) + b;
      for (int64_t i = 0; i < len; ++i)
        py[i] = init;
      for (int64_t c = 0; c < combos; ++c) {
        const float *px = base + offsetOf(c, reducedOuter);
        if (kind == ReduceKind::Max)
          for (int64_t i = 0; i < len; ++i)
            py[i] = maxOf(py[i], px[i]);
        else
          for (int64_t i = 0; i < len; ++i)
            py[i] += px[i];
      }
      if (kind == ReduceKind::Mean)
        for (int64_t i = 0; i < len; ++i)
          py[i] *= scale;
    }
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
