//===- ShardingInterfaceTest.cpp - Every loom op can be sharded -*- C++ -*-===//
//
// Upstream propagation rejects an op without `ShardingInterface`, so an op
// added to ir/*.td without a loop nest (ir/sharding/) fails here first.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomDialect.h"

#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;

TEST(ShardingInterface, EveryRegisteredLoomOpImplementsIt) {
  MLIRContext ctx;
  ctx.loadDialect<loom::LoomDialect>();
  int loomOps = 0;
  for (RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "loom")
      continue;
    // A bucket's collectives and micro-batches exist only in one rank's
    // partitioned program (loom-bucket-all-reduces,
    // loom-bucket-block-collectives and loom-unroll-micro-batches run after
    // shard-partition).
    if (name.getStringRef().ends_with("_start") ||
        name.getStringRef().ends_with("_wait") ||
        name.getStringRef() == "loom.micro_batch")
      continue;
    ++loomOps;
    EXPECT_TRUE(name.hasInterface<shard::ShardingInterface>())
        << name.getStringRef().str()
        << " has no sharding model: give it a loop nest in "
           "ir/sharding/LoopNests.cpp and attach it in ShardingModel.cpp";
  }
  EXPECT_GT(loomOps, 60); // the dialect is registered, not an empty walk
}
