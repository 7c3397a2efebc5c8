//===- OnnxGraphImporter.h - ONNX graph to loom ops (internal) --*- C++ -*-===//
//
// Internal to `LoomFrontendOnnx`. `OnnxImporter.cpp` loads, checks and
// shape-infers a model; `GraphImporter` turns the checked graph into
// `func.func @main`; `OnnxOps.cpp` holds one converter per ONNX op type.
// Everything here may call ONNX code that throws: `importOnnxFile` catches.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_FRONTEND_ONNXGRAPHIMPORTER_H
#define LOOM_FRONTEND_ONNXGRAPHIMPORTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

#include <string>
#include <vector>

namespace mlir::loom::onnx_import {

/// Where in the model file things are. For `.onnxtext` files the text is
/// searched so that nodes point at their line; binary files give line 0.
class SourceLocator {
public:
  SourceLocator(MLIRContext *ctx, StringRef displayPath, StringRef text);

  /// The location of the whole file.
  Location fileLoc() const;
  /// `NameLoc(name)` around the file position of node `index` (its first
  /// output assigned on a line of its own in text syntax).
  Location nodeLoc(const onnx::NodeProto &node, int index);
  /// `NameLoc(name)` around the first line mentioning `name`.
  Location valueLoc(StringRef name) const;

private:
  Location at(unsigned line, unsigned col) const;

  MLIRContext *ctx;
  std::string path;
  std::vector<std::string> lines;
  unsigned nextNodeLine = 0;
};

/// The display name of a node: its ONNX name, or `<op_type>_<index>`.
std::string nodeName(const onnx::NodeProto &node, int index);

/// Converts the nodes of one checked, shape-inferred ONNX graph.
class GraphImporter {
public:
  /// `folded` holds the values ONNX's data propagation computed for integer
  /// tensors; nodes without a converter whose outputs are all folded (shape
  /// subgraphs) are imported as integer constants.
  GraphImporter(MLIRContext *ctx, const onnx::ModelProto &model,
                SourceLocator &locator, int64_t opset,
                llvm::StringMap<SmallVector<int64_t>> folded = {});

  /// Builds `@main` into `module`; emits diagnostics and fails on the first
  /// node that cannot be imported.
  LogicalResult importInto(ModuleOp module);

  //===--------------------------------------------------------------------===//
  // Services for the op converters (OnnxOps.cpp)
  //===--------------------------------------------------------------------===//

  /// The float32 tensor that is input `index` of the current node, or a
  /// diagnostic (missing, integer, dynamic shape, ...).
  FailureOr<Value> data(unsigned index);
  /// Whether the current node has a non-empty input `index`.
  bool hasInput(unsigned index) const;
  /// The integers of input `index` of the current node, which must be a
  /// constant (initializer or `Constant` node output).
  FailureOr<SmallVector<int64_t>> constInts(unsigned index);
  /// Binds output `index` of the current node to `value`, after checking that
  /// its type agrees with what ONNX's shape inference found.
  LogicalResult define(unsigned index, Value value);
  /// Binds output `out` of the current node to whatever input `in` is (a
  /// float32 value or an integer constant).
  LogicalResult forward(unsigned in, unsigned out);
  /// Binds output `index` of the current node to integer constants.
  void defineInts(unsigned index, SmallVector<int64_t> values);

  /// Attribute accessors for the current node, with ONNX defaults.
  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t intAttr(StringRef name, int64_t dflt) const;
  float floatAttr(StringRef name, float dflt) const;

  /// An error at the current node: "WHAT at node 'NAME'[: DETAIL]".
  InFlightDiagnostic error(const Twine &what, const Twine &detail = "");

  const onnx::NodeProto &node() const { return *current; }
  StringRef name() const { return currentName; }
  Location loc() const { return currentLoc; }
  int64_t opset() const { return opsetVersion; }
  OpBuilder &builder() { return b; }
  MLIRContext *context() { return ctx; }

private:
  struct Known {
    const onnx::TypeProto *type = nullptr;
    const onnx::TensorProto *initializer = nullptr;
  };

  LogicalResult checkSupportedOps();
  bool isFoldedShapeNode(const onnx::NodeProto &node) const;
  FailureOr<RankedTensorType> staticF32Type(StringRef name, Location loc,
                                            StringRef role, StringRef where);
  FailureOr<SmallVector<int64_t>> intsOf(const onnx::TensorProto &tensor);

  MLIRContext *ctx;
  const onnx::ModelProto &model;
  SourceLocator &locator;
  int64_t opsetVersion;
  OpBuilder b;

  /// Types from graph inputs, outputs, `value_info` and initializers.
  llvm::StringMap<Known> known;
  llvm::StringMap<Value> values;
  llvm::StringMap<SmallVector<int64_t>> ints;
  llvm::StringMap<SmallVector<int64_t>> folded;

  std::vector<Location> nodeLocs;
  const onnx::NodeProto *current = nullptr;
  std::string currentName;
  Location currentLoc;
};

/// How one ONNX op type is imported.
using ConvertFn = LogicalResult (*)(GraphImporter &);
struct OpConverter {
  const char *opType;
  int minOpset;
  int maxOpset;
  ConvertFn convert;
  /// One line for docs and `--list-ops`: what the op becomes.
  const char *mapping;
};

/// The supported ONNX ops (default domain), sorted by op type.
ArrayRef<OpConverter> getOpConverters();
/// The converter for `opType` at `opset`, or null.
const OpConverter *lookupOpConverter(StringRef opType, int64_t opset);

/// "float32", "int64", ... for an ONNX `TensorProto::DataType`.
std::string elementTypeName(int32_t dataType);

} // namespace mlir::loom::onnx_import

#endif // LOOM_FRONTEND_ONNXGRAPHIMPORTER_H
