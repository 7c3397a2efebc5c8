//===- EntryFunction.h - The function that holds the training step -*- C++ -*-===//
//
// The importer creates one function, the training passes extend it into the
// whole training step, and the emitter reads it. Every pass and tool finds it
// through these helpers, so that splitting the step into several functions
// (pipeline stages) changes one place.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IR_ENTRYFUNCTION_H
#define LOOM_IR_ENTRYFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::loom {

/// Symbol name of the entry function.
inline constexpr llvm::StringLiteral kEntryFunction = "main";

/// The module's entry function, or null when it has none.
inline func::FuncOp lookupEntryFunction(ModuleOp module) {
  return module.lookupSymbol<func::FuncOp>(kEntryFunction);
}

/// Whether `func` is the entry function (and has a body).
inline bool isEntryFunction(func::FuncOp func) {
  return !func.isExternal() && func.getSymName() == kEntryFunction;
}

} // namespace mlir::loom

#endif // LOOM_IR_ENTRYFUNCTION_H
