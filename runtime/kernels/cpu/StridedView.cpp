//===- StridedView.cpp - Strided views of the layout ops --------*- C++ -*-===//

#include "runtime/kernels/cpu/StridedView.h"

#include <algorithm>

namespace loom::runtime::cpu {

std::vector<int64_t> denseStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

StatusOr<SliceView> sliceView(const OpView &op,
                              const std::vector<int64_t> &full) {
  SliceView v;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> starts, op.intsAttr("starts"));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> ends, op.intsAttr("ends"));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> steps, op.intsAttr("steps"));
  if (starts.size() != axes.size() || ends.size() != axes.size() ||
      steps.size() != axes.size())
    return makeError("axes, starts, ends and steps must have the same length");
  std::vector<int64_t> start(full.size(), 0), step(full.size(), 1);
  std::vector<bool> seen(full.size(), false);
  v.sliced = full;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < 0 || a >= static_cast<int64_t>(full.size()) || seen[a])
      return makeError("axis %lld is out of range or repeated", (long long)a);
    if (steps[i] <= 0)
      return makeError("step %lld of axis %lld must be positive",
                       (long long)steps[i], (long long)a);
    seen[a] = true;
    int64_t s = std::clamp<int64_t>(starts[i], 0, full[a]);
    int64_t e = std::clamp<int64_t>(ends[i], 0, full[a]);
    start[a] = s;
    step[a] = steps[i];
    v.sliced[a] = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
  }
  std::vector<int64_t> stride = denseStrides(full);
  for (size_t d = 0; d < full.size(); ++d) {
    v.dims.push_back({v.sliced[d], stride[d] * step[d]});
    v.base += start[d] * stride[d];
  }
  return v;
}

std::vector<StridedDim> transposeDims(const std::vector<int64_t> &xs,
                                      const std::vector<int64_t> &perm) {
  std::vector<int64_t> xStride = denseStrides(xs);
  std::vector<StridedDim> dims;
  for (int64_t p : perm) {
    if (xs[p] == 1)
      continue;
    // Adjacent in the input too (size-1 dims in between do not matter).
    if (!dims.empty() && dims.back().stride == xStride[p] * xs[p])
      dims.back() = {dims.back().size * xs[p], xStride[p]};
    else
      dims.push_back({xs[p], xStride[p]});
  }
  return dims;
}

} // namespace loom::runtime::cpu
