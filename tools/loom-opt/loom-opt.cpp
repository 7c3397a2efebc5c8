//===- loom-opt.cpp - The loom pass driver ----------------------*- C++ -*-===//

#include "ir/LoomDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::loom::LoomDialect, mlir::func::FuncDialect,
                  mlir::shard::ShardDialect, mlir::tensor::TensorDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::shard::registerShardingPropagation();
  mlir::shard::registerPartition();
  mlir::loom::registerLoomPasses();
  mlir::loom::registerLoomPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom pass driver\n", registry));
}
