//===- MeshTopology.cpp - Which link each mesh axis talks over --*- C++ -*-===//

#include "passes/planner/MeshTopology.h"

#include <algorithm>
#include <cassert>

using namespace mlir::loom;
using namespace mlir::loom::planner;

MeshTopology::MeshTopology(llvm::ArrayRef<MeshAxis> axes,
                           int64_t devicesPerNode)
    : meshAxes(axes.begin(), axes.end()),
      devicesPerNode(std::max<int64_t>(1, devicesPerNode)) {}

MeshTopology MeshTopology::ppDpTp(int64_t pp, int64_t dp, int64_t tp,
                                  int64_t devicesPerNode) {
  return MeshTopology({{"pp", pp}, {"dp", dp}, {"tp", tp}}, devicesPerNode);
}

int MeshTopology::axisIndex(llvm::StringRef name) const {
  for (auto [i, axis] : llvm::enumerate(meshAxes))
    if (axis.name == name)
      return static_cast<int>(i);
  return -1;
}

int64_t MeshTopology::numDevices() const {
  int64_t n = 1;
  for (const MeshAxis &axis : meshAxes)
    n *= axis.size;
  return n;
}

int64_t MeshTopology::stride(unsigned axis) const {
  int64_t s = 1;
  for (unsigned i = axis + 1; i < meshAxes.size(); ++i)
    s *= meshAxes[i].size;
  return s;
}

AxisGroup MeshTopology::group(llvm::ArrayRef<unsigned> axes) const {
  AxisGroup g;
  int outermost = -1;
  for (unsigned axis : axes) {
    assert(axis < meshAxes.size() && "no such mesh axis");
    if (meshAxes[axis].size <= 1)
      continue;
    g.size *= meshAxes[axis].size;
    if (outermost < 0 || static_cast<int>(axis) < outermost)
      outermost = axis;
  }
  if (g.size == 1 || numDevices() <= devicesPerNode)
    return g;
  // Every group lies inside the aligned block of ranks that the outermost
  // of its axes spans (its stride times its size). Nodes are aligned blocks
  // of `devicesPerNode` ranks, so the groups stay inside nodes exactly when
  // a node holds whole blocks; otherwise a node boundary cuts some block,
  // and the group through it, in two.
  int64_t block = stride(outermost) * meshAxes[outermost].size;
  if (devicesPerNode % block != 0)
    g.level = LinkLevel::InterNode;
  return g;
}
