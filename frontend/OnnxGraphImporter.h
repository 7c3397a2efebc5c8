//===- OnnxGraphImporter.h - ONNX graph to loom ops (internal) --*- C++ -*-===//
//
// Internal to `LoomFrontendOnnx`. `OnnxImporter.cpp` loads, checks and
// shape-infers a model; `GraphImporter` turns the checked graph into
// `func.func @main`; the op families (OnnxMathOps.cpp, OnnxShapeOps.cpp,
// OnnxNNOps.cpp) hold one converter per ONNX op type and OnnxFolding.cpp
// folds nodes whose inputs are all known.
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
#include "llvm/ADT/StringSet.h"

#include "onnx/onnx_pb.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::loom::onnx_import {

/// A tensor whose value the importer knows: integer and boolean tensors of
/// shape subgraphs and masks, and float tensors computed from `Constant`
/// nodes and constant initializers (`InitializerRoles`). Parameters are
/// never `ConstTensor`s.
struct ConstTensor {
  enum class Kind { Int, Float, Bool };
  Kind kind = Kind::Int;
  SmallVector<int64_t> shape;
  /// The elements of an `Int` or `Bool` (0/1) tensor, row-major.
  std::vector<int64_t> ints;
  /// The elements of a `Float` tensor, row-major.
  std::vector<float> floats;

  int64_t numElements() const;
  bool isFloat() const { return kind == Kind::Float; }
  /// Element `i` as a double (ints and bools converted).
  double get(int64_t i) const;
  static ConstTensor ofInts(SmallVector<int64_t> shape,
                            std::vector<int64_t> values);
  static ConstTensor ofFloats(SmallVector<int64_t> shape,
                              std::vector<float> values);
  /// A tensor of `shape` and this kind whose element `i` is element
  /// `source[i]` of this one (the layout ops: transpose, slice, gather...).
  ConstTensor select(SmallVector<int64_t> newShape,
                     ArrayRef<int64_t> source) const;
};

/// Folding works on tensors of at most this many elements.
inline constexpr int64_t kMaxFoldedElements = int64_t(1) << 24;

/// "float32", "int64", ... for an ONNX `TensorProto::DataType`.
std::string elementTypeName(int32_t dataType);
/// "2x3x4", or "scalar".
std::string shapeText(ArrayRef<int64_t> shape);
/// "[1, -1]".
std::string listText(ArrayRef<int64_t> values);
int64_t product(ArrayRef<int64_t> dims);
/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape);
/// The static shape of a ranked tensor value.
ArrayRef<int64_t> shapeOf(Value v);

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

/// Where an initializer's external data lives (OnnxExternalData.cpp).
struct ExternalTensor {
  /// The data file, resolved against the model's folder.
  std::string file;
  int64_t offset = 0;
  /// Bytes; -1 until known (to the end of the file).
  int64_t length = -1;
};

/// Resolves the initializers of `model` stored as external data, before
/// ONNX's checker and shape inference see them: non-float tensors are read
/// into `raw_data` (their files must be present); float32 tensors
/// (parameters) get a stub value and are returned by name with where their
/// bytes are, when their file is present. A missing float file is an error
/// unless `allowMissingWeights`. Offsets and lengths are checked against the
/// files and the tensors' shapes.
FailureOr<llvm::StringMap<ExternalTensor>>
resolveExternalData(Location loc, StringRef modelPath, onnx::ModelProto &model,
                    bool allowMissingWeights);

/// The bytes `ref` names, or a diagnostic naming the initializer `name`.
FailureOr<std::string> readExternalData(Location loc, StringRef name,
                                        const ExternalTensor &ref);

/// The values of a float32 initializer, from the file or its external data;
/// none when they are not stored (`--no-weights`, a stub).
std::optional<std::vector<float>>
readFloatInitializer(Location loc, const onnx::TensorProto &init,
                     const llvm::StringMap<ExternalTensor> &external);

/// A float32 initializer that is another one, or its transpose.
struct Tie {
  std::string parameter;
  bool transposed = false;
};

/// What the float32 initializers are to training (OnnxParameters.cpp):
/// parameters unless listed here.
struct InitializerRoles {
  /// Constants of the program, with why ("a scalar", "--freeze", ...).
  llvm::StringMap<std::string> constants;
  /// Copies of a parameter made by the exporter: trained as that parameter.
  llvm::StringMap<Tie> tied;
  /// Parameters the exporter wrote as `Identity` of another one with the
  /// same initial value (torch's eval-mode export deduplicates equal
  /// initializers: all-ones norm scales, zero biases): the output's name
  /// -> the initializer it starts from. Each is a parameter of its own.
  llvm::StringMap<std::string> deduplicated;
  /// The keys of `deduplicated`, in node order (the arguments' order).
  std::vector<std::string> deduplicatedOrder;
};

/// Classifies the float32 initializers of `model`; `trainPattern` and
/// `freezePattern` are regular expressions matched against whole names
/// (empty: none), or a diagnostic when they do not compile.
FailureOr<InitializerRoles>
classifyInitializers(Location loc, const onnx::ModelProto &model,
                     const llvm::StringMap<ExternalTensor> &external,
                     StringRef trainPattern, StringRef freezePattern);

/// The batch the import gives the graph inputs, when it differs from the
/// exported one (`exported` -1: the export's batch is symbolic).
struct BatchChange {
  int64_t exported = -1;
  int64_t imported = -1;
};

/// Converts the nodes of one checked, shape-inferred ONNX graph.
class GraphImporter {
public:
  /// `folded` holds the values ONNX's data propagation computed for integer
  /// tensors; nodes without a converter whose outputs are all folded (shape
  /// subgraphs) are imported as integer constants.
  /// `external` holds the float initializers whose data is in external
  /// files (`resolveExternalData`).
  /// `roles` says which float initializers are constants or tied copies
  /// rather than parameters.
  GraphImporter(MLIRContext *ctx, const onnx::ModelProto &model,
                SourceLocator &locator, int64_t opset,
                llvm::StringMap<SmallVector<int64_t>> folded = {},
                llvm::StringMap<ExternalTensor> external = {},
                InitializerRoles roles = {});

  /// Builds `@main` into `module`; emits diagnostics and fails on the first
  /// node that cannot be imported.
  LogicalResult importInto(ModuleOp module);

  //===--------------------------------------------------------------------===//
  // Services for the op converters (OnnxOps.cpp)
  //===--------------------------------------------------------------------===//

  /// The float32 tensor that is input `index` of the current node, or a
  /// diagnostic (missing, integer, dynamic shape, ...). A float constant is
  /// materialized as `loom.constant` at its first use.
  FailureOr<Value> data(unsigned index);
  /// The int64 tensor that is input `index` (a runtime int64 value such as a
  /// graph input, an integer constant materialized as `loom.constant`, or
  /// integers computed in f32 at run time, converted).
  FailureOr<Value> indices(unsigned index);
  /// Input `index` as an f32 tensor whatever its ONNX element type: float
  /// data, integers or bools computed at run time (held in f32: ids, masks,
  /// position counts), an int64 runtime value (converted), or a constant.
  FailureOr<Value> numeric(unsigned index);
  /// Whether input `index` holds integers or bools (a constant of those
  /// kinds, an int64 runtime value, or f32-held integers).
  bool isIntegral(unsigned index);
  /// Whether the current node has a non-empty input `index`.
  bool hasInput(unsigned index) const;
  /// The known value of input `index`, or null when it is computed at run
  /// time (or is a float initializer trained as a parameter).
  const ConstTensor *constant(unsigned index);
  /// Whether every non-empty input of the current node is a known value.
  bool allInputsConstant();
  /// The integers of input `index` of the current node, which must be a
  /// constant (initializer or `Constant` node output).
  FailureOr<SmallVector<int64_t>> constInts(unsigned index);
  /// Like `constInts`, for an optional input: `dflt` when it is absent.
  FailureOr<SmallVector<int64_t>> optionalConstInts(unsigned index,
                                                    ArrayRef<int64_t> dflt);
  /// The elements of input `index` when it is a float32 initializer with
  /// data (BatchNormalization's running statistics), or null.
  std::optional<ConstTensor> floatInitializer(unsigned index);
  /// The runtime value of input `index`, of any element type, or null.
  Value runtimeValue(unsigned index);
  /// Whether input `index` is a runtime value that holds the integers of an
  /// ONNX int64 tensor converted to f32 (see `Cast`).
  bool holdsConvertedInts(unsigned index);
  /// Binds output `index` of the current node to `value`, after checking that
  /// its type agrees with what ONNX's shape inference found.
  LogicalResult define(unsigned index, Value value);
  /// Like `define`, and marks the value as holding converted integers.
  LogicalResult defineConvertedInts(unsigned index, Value value);
  /// Binds output `out` of the current node to whatever input `in` is (a
  /// runtime value or a constant).
  LogicalResult forward(unsigned in, unsigned out);
  /// Binds output `index` of the current node to integer constants (1-D, or
  /// shaped as ONNX's inference says when the sizes agree).
  void defineInts(unsigned index, SmallVector<int64_t> values);
  /// Binds output `index` of the current node to a known value.
  void defineConst(unsigned index, ConstTensor value);
  /// The `loom.constant` (f32; bools as 0/1, ints converted) for `value`.
  /// A tensor that repeats along some dimensions is built from its distinct
  /// part and a `loom.expand`, so batch-sized masks stay small.
  Value materialize(const ConstTensor &value);
  /// A 0-d f32 `loom.constant` of `value`.
  Value scalar(float value) {
    return materialize(ConstTensor::ofFloats({}, {value}));
  }
  /// The static shape ONNX's inference found for output `index`, if any.
  std::optional<SmallVector<int64_t>> inferredShape(unsigned index) const;
  /// The ONNX element type of input `index` (from inference), or UNDEFINED.
  int32_t inputElementType(unsigned index) const;
  /// Whether `name` is an initializer.
  bool isInitializer(StringRef name) const {
    auto it = known.find(name);
    return it != known.end() && it->second.initializer;
  }
  /// Whether some later node or the graph outputs read output `index`.
  bool outputUsed(unsigned index) const;
  /// Whether output `index` of the current node is a parameter argument of
  /// its own (`InitializerRoles::deduplicated`).
  bool outputIsParameter(unsigned index) const {
    return index < static_cast<unsigned>(current->output_size()) &&
           roles.deduplicated.count(current->output(index));
  }

  /// Attribute accessors for the current node, with ONNX defaults.
  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t intAttr(StringRef name, int64_t dflt) const;
  float floatAttr(StringRef name, float dflt) const;

  /// An error at the current node: "WHAT at node 'NAME'[: DETAIL]".
  InFlightDiagnostic error(const Twine &what, const Twine &detail = "");
  /// `error` for shapes that do not fit together; when the import changed the
  /// batch from the exported one, the detail also says so (a batch baked into
  /// the exported graph is the likely cause).
  InFlightDiagnostic shapeError(const Twine &what, const Twine &detail = "");
  void setBatchChange(BatchChange change) { batchChange = change; }

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
  /// Value `name` as an i64 tensor for an integer graph output, or failure
  /// when it holds no integers.
  FailureOr<Value> integerOutput(StringRef name);
  /// Value `name` as 0/1 floats for a bool graph output, or failure when it
  /// holds no bools.
  FailureOr<Value> boolOutput(StringRef name);
  bool isFoldedShapeNode(const onnx::NodeProto &node) const;
  FailureOr<RankedTensorType> staticInputType(StringRef name, Location loc,
                                              StringRef role, StringRef where);
  const ConstTensor *constantNamed(StringRef name);

  MLIRContext *ctx;
  const onnx::ModelProto &model;
  SourceLocator &locator;
  int64_t opsetVersion;
  OpBuilder b;

  /// Types from graph inputs, outputs, `value_info` and initializers.
  llvm::StringMap<Known> known;
  llvm::StringMap<Value> values;
  /// Known values: integer/bool initializers (parsed at first use), `Constant`
  /// nodes and everything folded from them.
  llvm::StringMap<ConstTensor> consts;
  /// `loom.constant`s built for known float values used as data.
  llvm::StringMap<Value> materialized;
  /// Runtime f32 values that hold an ONNX int64 tensor's integers.
  llvm::StringSet<> convertedInts;
  BatchChange batchChange;
  /// Names read by some node or graph output.
  llvm::StringSet<> used;
  llvm::StringMap<SmallVector<int64_t>> folded;
  llvm::StringMap<ExternalTensor> external;
  InitializerRoles roles;

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

/// The converters of each op family (OnnxMathOps.cpp, OnnxShapeOps.cpp,
/// OnnxValueOps.cpp, OnnxNNOps.cpp), merged by `getOpConverters`.
ArrayRef<OpConverter> getMathOpConverters();
ArrayRef<OpConverter> getShapeOpConverters();
ArrayRef<OpConverter> getValueOpConverters();
ArrayRef<OpConverter> getNNOpConverters();
/// Ops built from other loom ops (OnnxComposedOps.cpp).
ArrayRef<OpConverter> getComposedOpConverters();
/// Activations, reductions and LogSoftmax built from other loom ops
/// (OnnxComposedMath.cpp).
ArrayRef<OpConverter> getComposedMathConverters();
/// A `Reduce*` node's axes (attribute, or input from opset 18; 13 for
/// ReduceSum), sorted and unique, all of them when none are given;
/// `noop` when none are given and `noop_with_empty_axes` is set
/// (OnnxMathOps.cpp).
struct ReduceAxes {
  SmallVector<int64_t> axes;
  bool keepDims = true;
  bool noop = false;
};
FailureOr<ReduceAxes> reduceAxes(GraphImporter &g, int64_t rank);
/// Checks GatherND's shapes: `batch` (batch_dims) below both ranks, the
/// leading `batch` dimensions shared, and `indices`' last dimension counting
/// 1 to the data's remaining rank (OnnxShapeOps.cpp).
LogicalResult checkGatherNdShapes(GraphImporter &g, ArrayRef<int64_t> data,
                                  ArrayRef<int64_t> indices, int64_t batch);
/// The current node's float inputs combined left to right by `combine`
/// (variadic Max, Min, Sum, Mean), or a diagnostic where two do not
/// broadcast (OnnxMathOps.cpp).
FailureOr<Value> chainInputs(GraphImporter &g,
                             llvm::function_ref<Value(Value, Value)> combine);
/// `MaxPool` of a `[N, C, D, H, W]` value: 2-D pooling of `[N, C*D, H, W]`,
/// then the max of the depth window's strided slices (OnnxComposedOps.cpp).
LogicalResult convertMaxPool3d(GraphImporter &g, Value x);
/// `Einsum` of one or two operands as sums, transposes and a (batch) matrix
/// product (OnnxEinsum.cpp).
LogicalResult convertEinsum(GraphImporter &g);

/// The window attributes of a 1-D or 2-D Conv/pooling node, lifted to 2-D
/// (a 1-D window over `[N, C, L]` is a `1 x k` window over `[N, C, 1, L]`).
struct Window {
  SmallVector<int64_t> kernel, strides, dilations;
  /// `[top, left, bottom, right]`.
  SmallVector<int64_t> pads;
};
/// Reads `kernel_shape` (default `kernelDflt`), `strides`, `dilations`,
/// `pads` and `auto_pad` for the spatial dimensions `spatial` (1 or 2 of
/// them), or a diagnostic (OnnxNNOps.cpp).
FailureOr<Window> windowAttrs(GraphImporter &g, ArrayRef<int64_t> spatial,
                              ArrayRef<int64_t> kernelDflt);
/// `windowAttrs` of a pooling node: `kernel_shape` required, dilation 1
/// unless `dilated`.
FailureOr<Window> poolWindow(GraphImporter &g, ArrayRef<int64_t> spatial,
                             bool dilated = false);
/// `[N, C, L]` as `[N, C, 1, L]` (4-D values unchanged), and back for a
/// result when the input had rank `rank` (OnnxNNOps.cpp).
FailureOr<Value> liftTo2d(GraphImporter &g, Value v);
FailureOr<Value> lowerTo1d(GraphImporter &g, Value v, size_t rank);
/// `ceil_mode`: widens the end pads of `win` (over the 2-D input `in2`) so
/// the last partial window is whole, or a diagnostic when it would start in
/// the padding. `room` checks that the window fits at all.
LogicalResult ceilModePads(GraphImporter &g, ArrayRef<int64_t> in2,
                           Window &win);
/// `MaxPool` of the 2-D `x2` (`[N, C, H, W]`) over a window with a dilation
/// other than 1: the element-wise max of the window's strided slices of `x2`
/// padded with -inf (OnnxComposedOps.cpp).
FailureOr<Value> dilatedMaxPool2d(GraphImporter &g, Value x2, Window win);

/// Folds the current node when all its inputs are known and its op type has
/// a folder (OnnxFolding.cpp). Returns true when the outputs were defined,
/// false when the node must be converted (no folder, or a result too large
/// to fold), failure after a diagnostic.
FailureOr<bool> foldNode(GraphImporter &g);
/// Whether `opType` has a folder.
bool hasFolder(StringRef opType);

/// Folders of indexing and scan ops (OnnxFoldingIndex.cpp), dispatched by
/// `foldNode`: true when the output was defined, false when too large.
FailureOr<bool> foldCumSum(GraphImporter &g);
FailureOr<bool> foldTile(GraphImporter &g);
FailureOr<bool> foldGatherElements(GraphImporter &g);
FailureOr<bool> foldScatterND(GraphImporter &g);
FailureOr<bool> foldGatherND(GraphImporter &g);
FailureOr<bool> foldPad(GraphImporter &g);

/// Elements added before and after one axis by `Pad` (negative: removed).
struct PadSpec {
  int64_t before = 0;
  int64_t after = 0;
};
/// The pads of the current `Pad` node per axis of a rank-`rank` input
/// (inputs `pads` and the optional `axes`), or a diagnostic.
FailureOr<SmallVector<PadSpec>> padSpecs(GraphImporter &g, int64_t rank);
/// The current `Pad` node's mode: constant (the default), reflect or edge,
/// or a diagnostic.
FailureOr<std::string> padMode(GraphImporter &g);

/// The converter of ops that only fold: a diagnostic naming the input that
/// is computed at run time.
LogicalResult convertFoldOnly(GraphImporter &g);

/// A `loom.reshape` of `input` to the static `outShape` with a batch-agnostic
/// specification (`batchAgnosticReshapeSpec`), or a diagnostic.
FailureOr<Value> reshapeTo(GraphImporter &g, Value input,
                           ArrayRef<int64_t> outShape);

/// The shape of input `index`, whether a known value or a runtime value.
FailureOr<SmallVector<int64_t>> inputShape(GraphImporter &g,
                                           unsigned index = 0);

/// NumPy broadcast of two shapes, or failure.
FailureOr<SmallVector<int64_t>> broadcastShape(ArrayRef<int64_t> a,
                                               ArrayRef<int64_t> b);
/// Normalises a possibly negative `axis` against `rank`; failure when out of
/// range.
FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank);

} // namespace mlir::loom::onnx_import

#endif // LOOM_FRONTEND_ONNXGRAPHIMPORTER_H
