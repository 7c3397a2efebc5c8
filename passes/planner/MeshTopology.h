//===- MeshTopology.h - Which link each mesh axis talks over ----*- C++ -*-===//
//
// The device mesh laid over the cluster's nodes: ranks are numbered
// row-major over the mesh axes (the last axis innermost), and rank r lives on
// node r / devices-per-node. With Loom's `pp x dp x tp` mesh that is
// Megatron's order, rank = (pp_i * dp + dp_i) * tp + tp_i, so tensor-parallel
// groups are the tightest.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_MESHTOPOLOGY_H
#define LOOM_PASSES_PLANNER_MESHTOPOLOGY_H

#include "passes/planner/Cluster.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::loom::planner {

/// One axis of the device mesh.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

/// The groups of a collective over some mesh axes: how many devices each
/// holds and the link they talk over. One-device groups never talk.
struct AxisGroup {
  int64_t size = 1;
  LinkLevel level = LinkLevel::IntraNode;
};

/// A mesh of devices (outermost axis first) placed on nodes of
/// `devicesPerNode` devices.
class MeshTopology {
public:
  MeshTopology(llvm::ArrayRef<MeshAxis> axes, int64_t devicesPerNode);

  /// Loom's `pp x dp x tp` mesh, tp innermost.
  static MeshTopology ppDpTp(int64_t pp, int64_t dp, int64_t tp,
                             int64_t devicesPerNode);

  llvm::ArrayRef<MeshAxis> axes() const { return meshAxes; }
  /// The index of the axis called `name`, or -1.
  int axisIndex(llvm::StringRef name) const;
  /// Devices in the mesh.
  int64_t numDevices() const;
  /// Distance between the ranks of neighbours along `axis`: the product of
  /// the sizes of the axes inside it.
  int64_t stride(unsigned axis) const;

  /// The groups of a collective over `axes` (indices into `axes()`): their
  /// size is the product of those axes' sizes, and they stay inside a node
  /// when every group does for every choice of the other coordinates.
  AxisGroup group(llvm::ArrayRef<unsigned> axes) const;
  /// The groups of one axis.
  AxisGroup group(unsigned axis) const { return group(llvm::ArrayRef(axis)); }

private:
  llvm::SmallVector<MeshAxis, 3> meshAxes;
  int64_t devicesPerNode;
};

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_MESHTOPOLOGY_H
