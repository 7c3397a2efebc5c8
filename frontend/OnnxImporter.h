//===- OnnxImporter.h - ONNX models into the loom dialect -------*- C++ -*-===//

#ifndef LOOM_FRONTEND_ONNXIMPORTER_H
#define LOOM_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace mlir::loom {

struct OnnxImportOptions {
  /// When set, dimension 0 of every graph input becomes this batch size.
  std::optional<int64_t> batchSize;
  /// Full static shapes for named graph inputs; wins over `batchSize`.
  llvm::StringMap<SmallVector<int64_t>> inputShapes;
  /// Whether float initializers (parameters) may lack their data: external
  /// data files that are missing are then not an error (`loomc
  /// --no-weights`). Integer constants the importer folds always need theirs.
  bool allowMissingWeights = false;
  /// Regular expressions matched against whole initializer names: float
  /// initializers to train whatever the defaults say, and to keep constant
  /// (`loomc --train`, `--freeze`; `train` wins). Empty: none.
  std::string trainPattern;
  std::string freezePattern;
};

/// Imports the ONNX model at `path` (binary protobuf, or ONNX text syntax
/// when the file name ends in `.onnxtext`) into a module holding one function
/// `@main`: arguments are the graph inputs (`loom.input = NAME`) followed by
/// the floating-point initializers that are parameters (`loom.param =
/// NAME`); scalars, exporter-made constants and `freezePattern` matches are
/// constants of the program, and an exporter's copy of a parameter (its
/// transpose, for a folded tied embedding) reads the parameter and is listed
/// in the module's `loom.tied` (docs/frontend.md); results are the
/// graph outputs (`loom.output = NAME`). The module carries
/// `loom.model_path` (the absolute path of the file) and `loom.opset`.
/// Initializers may store their data in external files (relative to the
/// model's folder); the importer reads only the integer ones it folds.
/// Runs ONNX's checker and shape inference first. Any problem is reported as
/// a diagnostic on `ctx` (naming the node, op type and opset) and yields
/// null; no exception escapes.
OwningOpRef<ModuleOp> importOnnxFile(MLIRContext *ctx, StringRef path,
                                     const OnnxImportOptions &options);

/// The ONNX op types the importer supports, with their opset ranges, one per
/// line (`loomc --list-ops`).
std::string listSupportedOnnxOps();

} // namespace mlir::loom

#endif // LOOM_FRONTEND_ONNXIMPORTER_H
