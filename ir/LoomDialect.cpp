//===- LoomDialect.cpp - The loom dialect -----------------------*- C++ -*-===//

#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "ir/sharding/LoopNest.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"

using namespace mlir;
using namespace mlir::loom;

#include "ir/LoomDialect.cpp.inc"

void LoomDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/LoomOps.cpp.inc"
      >();
  sharding::attachShardingModels(getContext());
}
