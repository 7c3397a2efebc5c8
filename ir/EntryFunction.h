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
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

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

/// The functions a plan's programs come from: with pipeline stages
/// (loom-split-stages) the stage functions, by `loom.pipeline_device`;
/// otherwise the entry function alone (none when there is none).
inline llvm::SmallVector<func::FuncOp> programFunctions(ModuleOp module) {
  llvm::SmallVector<std::pair<int64_t, func::FuncOp>> stages;
  for (auto f : module.getOps<func::FuncOp>())
    if (auto d = f->getAttrOfType<IntegerAttr>("loom.pipeline_device"))
      stages.push_back({d.getInt(), f});
  llvm::SmallVector<func::FuncOp> funcs;
  if (stages.empty()) {
    if (func::FuncOp entry = lookupEntryFunction(module))
      funcs.push_back(entry);
    return funcs;
  }
  llvm::sort(stages, [](const auto &a, const auto &b) { return a.first < b.first; });
  for (auto &[d, f] : stages)
    funcs.push_back(f);
  return funcs;
}

} // namespace mlir::loom

#endif // LOOM_IR_ENTRYFUNCTION_H
