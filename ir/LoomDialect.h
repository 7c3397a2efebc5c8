//===- LoomDialect.h - The loom dialect -------------------------*- C++ -*-===//

#ifndef LOOM_IR_LOOMDIALECT_H
#define LOOM_IR_LOOMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "ir/LoomDialect.h.inc"

#endif // LOOM_IR_LOOMDIALECT_H
