//===- BatchStatistics.cpp - A batch's per-channel mean and variance -----===//

#include "passes/BatchStatistics.h"

using namespace mlir;
using namespace mlir::loom;

SmallVector<int64_t> mlir::loom::batchNormAxes(int64_t rank) {
  SmallVector<int64_t> axes{0};
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  return axes;
}

Value mlir::loom::castToF32(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getElementType().isF32())
    return v;
  return ConvertOp::create(b, loc, v, b.getF32Type());
}

BatchStatistics mlir::loom::buildBatchStatistics(OpBuilder &b, Location loc,
                                                 Value x) {
  BatchStatistics s;
  s.input = castToF32(b, loc, x);
  auto type = cast<RankedTensorType>(s.input.getType());
  SmallVector<int64_t> axes = batchNormAxes(type.getRank());
  s.count = 1;
  for (int64_t d : axes)
    s.count *= type.getDimSize(d);
  auto axesAttr = b.getDenseI64ArrayAttr(axes);
  auto inverse = b.getF64FloatAttr(1.0 / static_cast<double>(s.count));
  auto meanOf = [&](Value v) {
    Value sum = ReduceSumOp::create(b, loc, v, axesAttr, b.getUnitAttr());
    return ScaleOp::create(b, loc, sum, inverse).getResult();
  };
  s.mean = meanOf(s.input);
  s.centered = SubOp::create(b, loc, s.input, s.mean);
  s.variance = meanOf(MulOp::create(b, loc, s.centered, s.centered));
  return s;
}
