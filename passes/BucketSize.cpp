//===- BucketSize.cpp - How many bytes a bucket of collectives holds -----===//

#include "passes/BucketSize.h"

#include "passes/MeshUtils.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/CostModel.h"
#include "passes/planner/MeshTopology.h"

#include <algorithm>
#include <string>

using namespace mlir;
using namespace mlir::loom;


FailureOr<int64_t>
mlir::loom::linkBucketBytes(func::FuncOp func,
                            ArrayRef<SmallVector<int16_t>> axisGroups,
                            StringRef cluster, StringRef pass) {
  auto module = func->getParentOfType<ModuleOp>();
  shard::GridOp mesh = module ? lookupMesh(module) : nullptr;
  std::string spec = cluster.str();
  llvm::Expected<Cluster> parsed = parseCluster(spec);
  if (!parsed) {
    func.emitError() << pass << ": " << llvm::toString(parsed.takeError());
    return failure();
  }
  if (!mesh)
    return planner::kMaxBucketBytes;
  SmallVector<planner::MeshAxis, 3> axes;
  for (int64_t size : mesh.getShape())
    axes.push_back({"", size});
  planner::MeshTopology topology(axes, parsed->devicesPerNode);
  int64_t target = 0;
  for (ArrayRef<int16_t> group : axisGroups) {
    SmallVector<unsigned> ids(group.begin(), group.end());
    planner::AxisGroup g = topology.group(ids);
    target = std::max(target,
                      planner::bucketBytes(g.size, parsed->link(g.level)));
  }
  return target;
}

