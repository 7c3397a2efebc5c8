//===- OnnxGraphImporter.cpp - ONNX graph to loom ops -----------*- C++ -*-===//
//
// Walks a checked and shape-inferred ONNX graph in node order and builds
// `func.func @main`. Graph inputs become `loom.input` arguments, float32
// initializers used as data become `loom.param` arguments (initializer
// order), integer tensors are kept aside as shape operands.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"
#include "ir/ErrorKind.h"

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include "onnx/defs/tensor_proto_util.h"

#include <cctype>
#include <cstring>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

//===----------------------------------------------------------------------===//
// Names and source positions
//===----------------------------------------------------------------------===//

std::string onnx_import::nodeName(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "_" + std::to_string(index)
                         : node.name();
  // Names come from the file: one of a megabyte would be echoed in every
  // error and location that names the node.
  constexpr size_t kMaxNameBytes = 256;
  if (name.size() > kMaxNameBytes)
    name = name.substr(0, kMaxNameBytes) + "...(" +
           std::to_string(name.size()) + " bytes)";
  return name;
}

std::string onnx_import::elementTypeName(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return "float32";
  case onnx::TensorProto::DOUBLE:
    return "float64";
  case onnx::TensorProto::UNDEFINED:
    return "undefined";
  default:
    break;
  }
  if (!onnx::TensorProto::DataType_IsValid(dataType))
    return "unknown(" + std::to_string(dataType) + ")";
  std::string name = onnx::TensorProto::DataType_Name(
      static_cast<onnx::TensorProto::DataType>(dataType));
  for (char &c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

SourceLocator::SourceLocator(MLIRContext *ctx, StringRef displayPath,
                             StringRef text)
    : ctx(ctx), path(displayPath.str()) {
  SmallVector<StringRef> split;
  if (!text.empty())
    text.split(split, '\n');
  for (StringRef line : split)
    lines.push_back(line.rtrim('\r').str());
}

Location SourceLocator::at(unsigned line, unsigned col) const {
  return FileLineColLoc::get(ctx, path, line, col);
}

Location SourceLocator::fileLoc() const { return at(0, 0); }

static bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

Location SourceLocator::nodeLoc(const onnx::NodeProto &node, int index) {
  auto name = StringAttr::get(ctx, nodeName(node, index));
  if (lines.empty() || node.output_size() == 0 || node.output(0).empty())
    return NameLoc::get(name, fileLoc());
  // In text syntax a node starts with its outputs: `y, z = Op(...)`.
  StringRef out = node.output(0);
  for (unsigned i = nextNodeLine; i < lines.size(); ++i) {
    StringRef line = lines[i];
    size_t indent = line.find_first_not_of(" \t");
    if (indent == StringRef::npos)
      continue;
    StringRef rest = line.drop_front(indent);
    if (!rest.consume_front(out))
      continue;
    rest = rest.ltrim();
    if (!rest.starts_with("=") && !rest.starts_with(","))
      continue;
    nextNodeLine = i + 1;
    return NameLoc::get(name, at(i + 1, indent + 1));
  }
  return NameLoc::get(name, fileLoc());
}

Location SourceLocator::valueLoc(StringRef name) const {
  auto nameAttr = StringAttr::get(ctx, name);
  for (auto [i, text] : llvm::enumerate(lines)) {
    StringRef line = text;
    for (size_t pos = line.find(name); pos != StringRef::npos;
         pos = line.find(name, pos + 1)) {
      size_t end = pos + name.size();
      if ((pos == 0 || !isIdentChar(line[pos - 1])) &&
          (end == line.size() || !isIdentChar(line[end])))
        return NameLoc::get(nameAttr, at(i + 1, pos + 1));
    }
  }
  return NameLoc::get(nameAttr, fileLoc());
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

GraphImporter::GraphImporter(MLIRContext *ctx, const onnx::ModelProto &model,
                             SourceLocator &locator, int64_t opset,
                             llvm::StringMap<SmallVector<int64_t>> folded,
                             llvm::StringMap<ExternalTensor> external,
                             InitializerRoles roles)
    : ctx(ctx), model(model), locator(locator), opsetVersion(opset), b(ctx),
      folded(std::move(folded)), external(std::move(external)),
      roles(std::move(roles)), currentLoc(UnknownLoc::get(ctx)) {
  const onnx::GraphProto &graph = model.graph();
  for (const auto &info : graph.input())
    known[info.name()].type = &info.type();
  for (const auto &info : graph.value_info())
    known[info.name()].type = &info.type();
  for (const auto &info : graph.output())
    known[info.name()].type = &info.type();
  for (const auto &init : graph.initializer())
    known[init.name()].initializer = &init;
  for (const auto &node : graph.node())
    for (const std::string &in : node.input())
      used.insert(in);
  for (const auto &info : graph.output())
    used.insert(info.name());
}

/// The element type and, when fully static, the shape of an ONNX tensor type.
/// On failure, `why` says what is missing.
static FailureOr<SmallVector<int64_t>>
staticShapeOf(const onnx::TypeProto &type, std::string &why) {
  if (!type.has_tensor_type()) {
    why = "is not a tensor";
    return failure();
  }
  const auto &tensor = type.tensor_type();
  if (!tensor.has_shape()) {
    why = "has an unknown rank";
    return failure();
  }
  SmallVector<int64_t> shape;
  for (auto [i, dim] : llvm::enumerate(tensor.shape().dim())) {
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    why = "has a dynamic shape (dimension " + std::to_string(i) +
          (dim.has_dim_param() ? " is '" + dim.dim_param() + "'"
                               : std::string(" is unknown")) +
          "); set the batch size or the input shape";
    return failure();
  }
  return shape;
}

/// How the program holds a graph value of ONNX element type `t`: in int64
/// (true), in float32 (false: floats of any width, and bools as 0/1), or not
/// at all.
static std::optional<bool> heldAsInteger(int32_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::BOOL:
    return false;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
    return true;
  default:
    return std::nullopt;
  }
}

/// The `loom.onnx_type` of a graph value of ONNX element type `t`: empty when
/// the program holds it as it is (float32, int64).
static std::string boundaryTypeName(int32_t t) {
  std::string name = elementTypeName(t);
  return llvm::is_contained(kBoundaryTypes, name) ? name : std::string();
}

/// The ONNX element type of a graph value's type (float32 when it says none).
static int32_t elementTypeOf(const onnx::TypeProto &type) {
  return type.has_tensor_type() ? type.tensor_type().elem_type()
                                : onnx::TensorProto::FLOAT;
}

FailureOr<RankedTensorType> GraphImporter::staticInputType(StringRef name,
                                                           Location loc,
                                                           StringRef role,
                                                           StringRef where) {
  auto it = known.find(name);
  if (it == known.end() || !it->second.type)
    return emitError(loc) << role << " '" << name << "'" << where
                          << " has no type (ONNX shape inference found none)";
  const onnx::TypeProto &type = *it->second.type;
  int32_t t = elementTypeOf(type);
  std::optional<bool> integer = heldAsInteger(t);
  if (!integer)
    return emitError(loc)
           << role << " '" << name << "'" << where << " has element type "
           << elementTypeName(t)
           << "; only float, bool and integer tensors are supported";
  Type elem =
      *integer ? Type(IntegerType::get(ctx, 64)) : Type(Float32Type::get(ctx));
  std::string why;
  auto shape = staticShapeOf(type, why);
  if (failed(shape))
    return emitError(loc) << role << " '" << name << "'" << where << " " << why;
  return RankedTensorType::get(*shape, elem);
}

bool GraphImporter::isFoldedShapeNode(const onnx::NodeProto &node) const {
  if (node.output_size() == 0)
    return false;
  for (const std::string &out : node.output()) {
    if (!folded.count(out))
      return false;
    auto it = known.find(out);
    // Only integer tensors: float values stay data even when known.
    if (it == known.end() || !it->second.type ||
        !it->second.type->has_tensor_type())
      return false;
    int32_t elem = it->second.type->tensor_type().elem_type();
    if (elem != onnx::TensorProto::INT64 && elem != onnx::TensorProto::INT32)
      return false;
  }
  return true;
}

LogicalResult GraphImporter::checkSupportedOps() {
  llvm::StringSet<> reported;
  bool ok = true;
  for (auto [i, node] : llvm::enumerate(model.graph().node())) {
    bool onnxDomain = node.domain().empty() || node.domain() == "ai.onnx";
    int64_t version = opsetVersion;
    std::string opName = node.op_type();
    if (!onnxDomain) {
      opName = node.domain() + "." + node.op_type();
      version = 0;
      for (const auto &imp : model.opset_import())
        if (imp.domain() == node.domain())
          version = imp.version();
    }
    if (onnxDomain && (lookupOpConverter(node.op_type(), opsetVersion) ||
                       isFoldedShapeNode(node)))
      continue;
    if (!reported.insert(opName).second)
      continue;
    ok = false;
    recordErrorKind(ErrorKind::Unsupported);
    emitError(nodeLocs[i]) << "unsupported ONNX op '" << opName << "' (opset "
                           << version << ") at node '" << nodeName(node, i)
                           << "'; run 'loomc --list-ops' for the supported set";
  }
  return success(ok);
}

LogicalResult GraphImporter::importInto(ModuleOp module) {
  const onnx::GraphProto &graph = model.graph();
  // Source positions of nodes are found by scanning forward; compute them
  // once, in order.
  for (auto [i, node] : llvm::enumerate(graph.node()))
    nodeLocs.push_back(locator.nodeLoc(node, static_cast<int>(i)));
  if (failed(checkSupportedOps()))
    return failure();

  // The first node reading each value, to name it in shape diagnostics.
  llvm::StringMap<int> firstUse;
  for (auto [i, node] : llvm::enumerate(graph.node()))
    for (const std::string &in : node.input())
      firstUse.try_emplace(in, static_cast<int>(i));
  // Arguments: graph inputs that are not initializers, then float32
  // initializers (a graph input that is also an initializer is a parameter).
  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  SmallVector<std::pair<StringRef, StringRef>> argRoles;
  for (const auto &input : graph.input()) {
    if (known[input.name()].initializer)
      continue;
    Location loc = locator.valueLoc(input.name());
    auto use = firstUse.find(input.name());
    std::string where;
    if (use != firstUse.end()) {
      loc = nodeLocs[use->second];
      where =
          " at node '" + nodeName(graph.node(use->second), use->second) + "'";
    }
    auto type = staticInputType(input.name(), loc, "graph input", where);
    if (failed(type))
      return failure();
    if (use != firstUse.end()) {
      // Shape problems of graph inputs are reported at their first use; the
      // argument itself points at the declaration.
      loc = locator.valueLoc(input.name());
    }
    argTypes.push_back(*type);
    argLocs.push_back(loc);
    argRoles.push_back({attr::kInput, input.name()});
  }
  size_t numInputs = argTypes.size();
  for (const auto &init : graph.initializer()) {
    if (init.data_type() != onnx::TensorProto::FLOAT ||
        roles.constants.count(init.name()) || roles.tied.count(init.name()))
      continue;
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    argTypes.push_back(RankedTensorType::get(shape, Float32Type::get(ctx)));
    argLocs.push_back(locator.valueLoc(init.name()));
    argRoles.push_back({attr::kParam, init.name()});
  }
  // Parameters the exporter deduplicated start from the initializer they
  // were merged into.
  llvm::DenseMap<unsigned, StringRef> startsFrom;
  for (const std::string &name : roles.deduplicatedOrder) {
    StringRef from = roles.deduplicated.find(name)->second;
    const onnx::TensorProto *init = known[from].initializer;
    SmallVector<int64_t> shape(init->dims().begin(), init->dims().end());
    startsFrom[argTypes.size()] = from;
    argTypes.push_back(RankedTensorType::get(shape, Float32Type::get(ctx)));
    argLocs.push_back(locator.valueLoc(name));
    argRoles.push_back({attr::kParam, name});
  }

  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, locator.fileLoc(), kEntryFunction,
                                   b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [i, role] : llvm::enumerate(argRoles)) {
    BlockArgument arg = entry->getArgument(i);
    arg.setLoc(argLocs[i]);
    func.setArgAttr(i, role.first, b.getStringAttr(role.second));
    if (auto from = startsFrom.find(i); from != startsFrom.end())
      func.setArgAttr(i, attr::kInitializer, b.getStringAttr(from->second));
    values[role.second] = arg;
    if (i >= numInputs)
      continue;
    int32_t t = elementTypeOf(*known[role.second].type);
    std::string boundary = boundaryTypeName(t);
    if (!boundary.empty())
      func.setArgAttr(i, attr::kOnnxType, b.getStringAttr(boundary));
    // Bools are held as 0/1 floats, as the comparisons compute them.
    if (t == onnx::TensorProto::BOOL)
      convertedInts.insert(role.second);
  }
  b.setInsertionPointToStart(entry);

  for (auto [i, node] : llvm::enumerate(graph.node())) {
    current = &node;
    currentName = nodeName(node, static_cast<int>(i));
    currentLoc = nodeLocs[i];
    // Known inputs first: shape subgraphs, masks and constant float math
    // fold to known values and emit nothing.
    if (allInputsConstant()) {
      FailureOr<bool> didFold = foldNode(*this);
      if (failed(didFold))
        return failure();
      if (*didFold)
        continue;
    }
    const OpConverter *conv = lookupOpConverter(node.op_type(), opsetVersion);
    if (!conv || isFoldedShapeNode(node)) {
      assert(isFoldedShapeNode(node) && "unsupported op let through");
      for (auto [j, out] : llvm::enumerate(node.output()))
        defineInts(j, folded.lookup(out));
      continue;
    }
    if (failed(conv->convert(*this)))
      return failure();
  }
  current = nullptr;

  SmallVector<Value> results;
  for (const auto &output : graph.output()) {
    Location loc = locator.valueLoc(output.name());
    int32_t elem = elementTypeOf(output.type());
    auto c = consts.find(output.name());
    std::optional<bool> integer = heldAsInteger(elem);
    if (!integer)
      return emitError(loc)
             << "graph output '" << output.name() << "' has element type "
             << elementTypeName(elem)
             << "; only float, bool and integer tensors are supported";
    currentLoc = loc;
    if (*integer) {
      // Integers: int64 values, or integers held in f32, converted.
      FailureOr<Value> ints = integerOutput(output.name());
      if (failed(ints))
        return emitError(loc) << "graph output '" << output.name()
                              << "' is not an integer tensor loom computes";
      results.push_back(*ints);
      continue;
    }
    if (elem == onnx::TensorProto::BOOL) {
      // Bools: 0/1 floats, as comparisons compute them.
      FailureOr<Value> mask = boolOutput(output.name());
      if (failed(mask))
        return emitError(loc) << "graph output '" << output.name()
                              << "' is not a bool tensor loom computes";
      results.push_back(*mask);
      continue;
    }
    if (c != consts.end() && c->second.isFloat()) {
      currentLoc = loc;
      results.push_back(materialize(c->second));
      continue;
    }
    auto it = values.find(output.name());
    if (it == values.end() || !cast<RankedTensorType>(it->second.getType())
                                   .getElementType()
                                   .isF32()) {
      if (c != consts.end() || it != values.end() ||
          known[output.name()].initializer)
        return emitError(loc) << "graph output '" << output.name()
                              << "' is not a float32 tensor; only float32 "
                                 "graph outputs are supported";
      return emitError(loc) << "graph output '" << output.name()
                            << "' is not produced by any node";
    }
    results.push_back(it->second);
  }
  func::ReturnOp::create(b, locator.fileLoc(), results);
  func.setType(b.getFunctionType(entry->getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  for (auto [i, output] : llvm::enumerate(graph.output())) {
    func.setResultAttr(i, attr::kOutput, b.getStringAttr(output.name()));
    std::string boundary = boundaryTypeName(elementTypeOf(output.type()));
    if (!boundary.empty())
      func.setResultAttr(i, attr::kOnnxType, b.getStringAttr(boundary));
  }

  // Initializers that ended up unused (only shape operands, a Gemm `C` with
  // `beta = 0`, or nothing at all) are not parameters.
  llvm::BitVector unused(entry->getNumArguments());
  for (unsigned i = numInputs; i < entry->getNumArguments(); ++i)
    if (entry->getArgument(i).use_empty())
      unused.set(i);
  if (unused.any() && failed(func.eraseArguments(unused)))
    return emitError(func.getLoc()) << "cannot drop unused initializers";
  return success();
}

FailureOr<Value> GraphImporter::boolOutput(StringRef name) {
  if (const ConstTensor *c = constantNamed(name)) {
    if (c->isFloat())
      return failure();
    return materialize(*c);
  }
  auto it = values.find(name);
  if (it == values.end())
    return failure();
  if (convertedInts.contains(name))
    return it->second;
  if (cast<RankedTensorType>(it->second.getType())
          .getElementType()
          .isInteger(64))
    return ConvertOp::create(b, currentLoc, it->second, b.getF32Type())
        .getResult();
  return failure();
}

FailureOr<Value> GraphImporter::integerOutput(StringRef name) {
  if (const ConstTensor *c = constantNamed(name)) {
    if (c->isFloat())
      return failure();
    auto type = RankedTensorType::get(c->shape, b.getI64Type());
    return ConstantOp::create(
               b, currentLoc,
               DenseElementsAttr::get(type, ArrayRef<int64_t>(c->ints)))
        .getResult();
  }
  auto it = values.find(name);
  if (it == values.end())
    return failure();
  Type elem = cast<RankedTensorType>(it->second.getType()).getElementType();
  if (elem.isInteger(64))
    return it->second;
  if (!convertedInts.contains(name))
    return failure();
  return ConvertOp::create(b, currentLoc, it->second, b.getI64Type())
      .getResult();
}

//===----------------------------------------------------------------------===//
// Services for op converters
//===----------------------------------------------------------------------===//

InFlightDiagnostic GraphImporter::error(const Twine &what,
                                        const Twine &detail) {
  // The converters say what Loom lacks in their own words: "unsupported
  // ..." or "... not supported".
  std::string text = what.str() + " " + detail.str();
  if (StringRef(text).contains("unsupported") ||
      StringRef(text).contains("not supported"))
    recordErrorKind(ErrorKind::Unsupported);
  InFlightDiagnostic diag = emitError(currentLoc)
                            << what << " at node '" << currentName << "'";
  if (!detail.isTriviallyEmpty())
    diag << ": " << detail;
  return diag;
}

InFlightDiagnostic GraphImporter::shapeError(const Twine &what,
                                             const Twine &detail) {
  if (batchChange.imported < 0)
    return error(what, detail);
  std::string hint =
      batchChange.exported < 0
          ? llvm::formatv("the model's batch is symbolic and is imported as "
                          "{0}; is a batch size baked into the exported "
                          "graph? export it with the batch you import",
                          batchChange.imported)
                .str()
          : llvm::formatv("the model was exported with batch {0} and is "
                          "imported with batch {1}; is that batch baked into "
                          "the exported graph? export it with the batch you "
                          "import",
                          batchChange.exported, batchChange.imported)
                .str();
  if (detail.isTriviallyEmpty())
    return error(what, hint);
  return error(what, detail + "; " + hint);
}

bool GraphImporter::hasInput(unsigned index) const {
  return index < static_cast<unsigned>(current->input_size()) &&
         !current->input(index).empty();
}

/// The elements of an initializer of a narrow integer type `T` (int8 to
/// uint64): little-endian in `raw_data`, else in `int32_data` (types up to 16
/// bits) or `uint64_data` (uint32, uint64).
template <typename T>
static std::vector<int64_t> narrowInts(const onnx::TensorProto &t) {
  std::vector<int64_t> out;
  if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    out.reserve(raw.size() / sizeof(T));
    for (size_t at = 0; at + sizeof(T) <= raw.size(); at += sizeof(T)) {
      T v;
      std::memcpy(&v, raw.data() + at, sizeof(T));
      out.push_back(static_cast<int64_t>(v));
    }
  } else if constexpr (sizeof(T) <= 2) {
    for (int32_t v : t.int32_data())
      out.push_back(static_cast<int64_t>(static_cast<T>(v)));
  } else {
    for (uint64_t v : t.uint64_data())
      out.push_back(static_cast<int64_t>(static_cast<T>(v)));
  }
  return out;
}

/// The elements of an integer or boolean initializer, or failure for other
/// element types.
static FailureOr<ConstTensor> parseInitializer(const onnx::TensorProto &t) {
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  ConstTensor c;
  c.shape = shape;
  switch (t.data_type()) {
  case onnx::TensorProto::INT64: {
    auto data = onnx::ParseData<int64_t>(&t);
    c.ints.assign(data.begin(), data.end());
    break;
  }
  case onnx::TensorProto::INT32: {
    auto data = onnx::ParseData<int32_t>(&t);
    c.ints.assign(data.begin(), data.end());
    break;
  }
  case onnx::TensorProto::BOOL: {
    // ParseData<bool> is not instantiated; bools are stored as int32_data
    // or one byte each in raw_data.
    c.kind = ConstTensor::Kind::Bool;
    if (t.has_raw_data())
      for (char byte : t.raw_data())
        c.ints.push_back(byte != 0);
    else
      for (int32_t v : t.int32_data())
        c.ints.push_back(v != 0);
    break;
  }
  case onnx::TensorProto::DOUBLE: {
    // Held in float32, as float64 graph inputs are: a constant, never a
    // parameter.
    auto data = onnx::ParseData<double>(&t);
    c.kind = ConstTensor::Kind::Float;
    c.floats.assign(data.begin(), data.end());
    if (static_cast<int64_t>(c.floats.size()) != c.numElements())
      return failure();
    return c;
  }
  case onnx::TensorProto::INT8:
    c.ints = narrowInts<int8_t>(t);
    break;
  case onnx::TensorProto::UINT8:
    c.ints = narrowInts<uint8_t>(t);
    break;
  case onnx::TensorProto::INT16:
    c.ints = narrowInts<int16_t>(t);
    break;
  case onnx::TensorProto::UINT16:
    c.ints = narrowInts<uint16_t>(t);
    break;
  case onnx::TensorProto::UINT32:
    c.ints = narrowInts<uint32_t>(t);
    break;
  case onnx::TensorProto::UINT64: {
    // Held as int64: values from 2^63 on do not fit.
    std::vector<int64_t> ints = narrowInts<uint64_t>(t);
    if (llvm::any_of(ints, [](int64_t v) { return v < 0; }))
      return failure();
    c.ints = std::move(ints);
    break;
  }
  default:
    return failure();
  }
  if (static_cast<int64_t>(c.ints.size()) != c.numElements())
    return failure();
  return c;
}

const ConstTensor *GraphImporter::constantNamed(StringRef name) {
  auto it = consts.find(name);
  if (it != consts.end())
    return &it->second;
  const onnx::TensorProto *init = known[name].initializer;
  if (!init)
    return nullptr;
  if (init->data_type() == onnx::TensorProto::FLOAT) {
    if (!roles.constants.count(name))
      return nullptr;
    std::optional<std::vector<float>> values =
        readFloatInitializer(currentLoc, *init, external);
    if (!values)
      return nullptr;
    SmallVector<int64_t> shape(init->dims().begin(), init->dims().end());
    return &(consts[name] = ConstTensor::ofFloats(shape, std::move(*values)));
  }
  auto parsed = parseInitializer(*init);
  if (failed(parsed))
    return nullptr;
  return &(consts[name] = std::move(*parsed));
}

const ConstTensor *GraphImporter::constant(unsigned index) {
  if (!hasInput(index))
    return nullptr;
  return constantNamed(current->input(index));
}

bool GraphImporter::allInputsConstant() {
  for (int i = 0; i < current->input_size(); ++i)
    if (hasInput(i) && !constant(i))
      return false;
  return true;
}

std::optional<ConstTensor> GraphImporter::floatInitializer(unsigned index) {
  if (!hasInput(index))
    return std::nullopt;
  const onnx::TensorProto *init = known[current->input(index)].initializer;
  if (!init || init->data_type() != onnx::TensorProto::FLOAT)
    return std::nullopt;
  std::optional<std::vector<float>> values =
      readFloatInitializer(currentLoc, *init, external);
  if (!values)
    return std::nullopt;
  SmallVector<int64_t> shape(init->dims().begin(), init->dims().end());
  return ConstTensor::ofFloats(shape, std::move(*values));
}

Value GraphImporter::runtimeValue(unsigned index) {
  if (!hasInput(index) || constant(index))
    return {};
  return values.lookup(current->input(index));
}

bool GraphImporter::holdsConvertedInts(unsigned index) {
  return hasInput(index) && runtimeValue(index) &&
         convertedInts.contains(current->input(index));
}

FailureOr<Value> GraphImporter::data(unsigned index) {
  if (!hasInput(index))
    return error(
        llvm::formatv("{0} is missing input {1}", current->op_type(), index));
  const std::string &name = current->input(index);
  if (const ConstTensor *c = constantNamed(name)) {
    if (c->isFloat()) {
      // One constant per known value, however often it is read.
      Value &m = materialized[name];
      if (!m)
        m = materialize(*c);
      return m;
    }
    return error("tensor '" + name + "' of element type " +
                     (c->kind == ConstTensor::Kind::Bool ? "bool" : "int64") +
                     " is used as data",
                 "integer data is not supported (only float32); integer "
                 "tensors may be shape operands, indices and Cast inputs");
  }
  auto tie = roles.tied.find(name);
  if (tie != roles.tied.end() && !values.count(name)) {
    // The exporter's copy of a parameter reads the parameter.
    Value param = values.lookup(tie->second.parameter);
    if (!param)
      return error("tensor '" + name + "' is a copy of parameter '" +
                   tie->second.parameter + "', which is not imported");
    if (tie->second.transposed)
      param = TransposeOp::create(b, currentLoc, param,
                                  b.getDenseI64ArrayAttr({1, 0}));
    values[name] = param;
  }
  if (roles.constants.count(name) && !values.count(name))
    return error("constant initializer '" + name + "' (" +
                     roles.constants.lookup(name) + ") has no stored value",
                 "the program needs it; give the model with its data, or "
                 "--train it to make it a parameter");
  auto it = values.find(name);
  if (it != values.end()) {
    Type elem = cast<RankedTensorType>(it->second.getType()).getElementType();
    if (elem.isF32())
      return it->second;
    return error("tensor '" + name + "' of element type int64 is used as data",
                 "integer data is not supported (only float32); Cast it to "
                 "float first");
  }
  const onnx::TensorProto *init = known[name].initializer;
  if (init)
    return error("tensor '" + name + "' of element type " +
                     elementTypeName(init->data_type()) + " is used as data",
                 "this element type is not supported as data (only float32)");
  return error("value '" + name + "' is not defined");
}

FailureOr<Value> GraphImporter::indices(unsigned index) {
  if (!hasInput(index))
    return error(
        llvm::formatv("{0} is missing input {1}", current->op_type(), index));
  const std::string &name = current->input(index);
  if (const ConstTensor *c = constantNamed(name)) {
    if (c->kind != ConstTensor::Kind::Int)
      return error("indices '" + name + "' are not integers");
    auto type = RankedTensorType::get(c->shape, b.getI64Type());
    return ConstantOp::create(
               b, currentLoc,
               DenseElementsAttr::get(type, ArrayRef<int64_t>(c->ints)))
        .getResult();
  }
  auto it = values.find(name);
  if (it != values.end() && cast<RankedTensorType>(it->second.getType())
                                .getElementType()
                                .isInteger(64))
    return it->second;
  if (it != values.end() && convertedInts.contains(name))
    return ConvertOp::create(b, currentLoc, it->second, b.getI64Type())
        .getResult();
  return error("indices '" + name + "' are not int64 tensors");
}

FailureOr<Value> GraphImporter::numeric(unsigned index) {
  if (!hasInput(index))
    return error(
        llvm::formatv("{0} is missing input {1}", current->op_type(), index));
  const std::string &name = current->input(index);
  if (const ConstTensor *c = constantNamed(name)) {
    Value &m = materialized[name];
    if (!m)
      m = materialize(*c);
    return m;
  }
  auto it = values.find(name);
  if (it != values.end() && cast<RankedTensorType>(it->second.getType())
                                .getElementType()
                                .isInteger(64))
    return ConvertOp::create(b, currentLoc, it->second, b.getF32Type())
        .getResult();
  return data(index);
}

bool GraphImporter::isIntegral(unsigned index) {
  if (!hasInput(index))
    return false;
  if (const ConstTensor *c = constant(index))
    return !c->isFloat();
  if (holdsConvertedInts(index))
    return true;
  Value v = values.lookup(current->input(index));
  return v && cast<RankedTensorType>(v.getType()).getElementType().isInteger(64);
}

FailureOr<SmallVector<int64_t>> GraphImporter::constInts(unsigned index) {
  if (!hasInput(index))
    return error(
        llvm::formatv("{0} is missing input {1}", current->op_type(), index));
  const std::string &name = current->input(index);
  if (const ConstTensor *c = constantNamed(name)) {
    if (c->isFloat())
      return error("shape operand '" + name + "' has element type float32",
                   "expected an integer tensor");
    return SmallVector<int64_t>(c->ints.begin(), c->ints.end());
  }
  if (const onnx::TensorProto *init = known[name].initializer)
    return error("shape operand '" + name + "' has element type " +
                     elementTypeName(init->data_type()),
                 "expected an integer tensor");
  return error("input '" + name + "' of " + current->op_type() +
                   " is computed at run time",
               "it must be a constant (an initializer or a Constant node)");
}

FailureOr<SmallVector<int64_t>>
GraphImporter::optionalConstInts(unsigned index, ArrayRef<int64_t> dflt) {
  if (!hasInput(index))
    return SmallVector<int64_t>(dflt);
  return constInts(index);
}

LogicalResult GraphImporter::define(unsigned index, Value value) {
  const std::string &name = current->output(index);
  auto type = cast<RankedTensorType>(value.getType());
  auto it = known.find(name);
  if (it != known.end() && it->second.type &&
      it->second.type->has_tensor_type() &&
      it->second.type->tensor_type().has_shape()) {
    const auto &dims = it->second.type->tensor_type().shape().dim();
    bool conflict = dims.size() != type.getRank();
    for (int i = 0; !conflict && i < dims.size(); ++i)
      conflict =
          dims[i].has_dim_value() && dims[i].dim_value() != type.getDimSize(i);
    if (conflict) {
      SmallVector<int64_t> onnxShape;
      for (const auto &d : dims)
        onnxShape.push_back(d.has_dim_value() ? d.dim_value()
                                              : ShapedType::kDynamic);
      std::string onnxText;
      llvm::raw_string_ostream os(onnxText);
      llvm::interleave(
          onnxShape, os,
          [&](int64_t d) {
            if (ShapedType::isDynamic(d))
              os << '?';
            else
              os << d;
          },
          "x");
      return error("shape mismatch for '" + name + "'",
                   "ONNX shape inference gives " + onnxText +
                       " but the imported op gives " +
                       shapeText(type.getShape()));
    }
  }
  values[name] = value;
  return success();
}

LogicalResult GraphImporter::defineConvertedInts(unsigned index, Value value) {
  convertedInts.insert(current->output(index));
  return define(index, value);
}

LogicalResult GraphImporter::forward(unsigned in, unsigned out) {
  if (const ConstTensor *c = constant(in)) {
    defineConst(out, *c);
    return success();
  }
  if (!hasInput(in))
    return error(
        llvm::formatv("{0} is missing input {1}", current->op_type(), in));
  auto it = values.find(current->input(in));
  if (it == values.end()) {
    // A tied copy is defined by its first read; anything else reports why.
    FailureOr<Value> value = data(in);
    if (failed(value))
      return failure();
    return define(out, *value);
  }
  if (holdsConvertedInts(in))
    convertedInts.insert(current->output(out));
  return define(out, it->second);
}

std::optional<SmallVector<int64_t>>
GraphImporter::inferredShape(unsigned index) const {
  auto it = known.find(current->output(index));
  if (it == known.end() || !it->second.type)
    return std::nullopt;
  std::string why;
  auto shape = staticShapeOf(*it->second.type, why);
  if (failed(shape))
    return std::nullopt;
  return *shape;
}

int32_t GraphImporter::inputElementType(unsigned index) const {
  if (!hasInput(index))
    return onnx::TensorProto::UNDEFINED;
  auto it = known.find(current->input(index));
  if (it == known.end())
    return onnx::TensorProto::UNDEFINED;
  if (it->second.initializer)
    return it->second.initializer->data_type();
  if (it->second.type && it->second.type->has_tensor_type())
    return it->second.type->tensor_type().elem_type();
  return onnx::TensorProto::UNDEFINED;
}

bool GraphImporter::outputUsed(unsigned index) const {
  return index < static_cast<unsigned>(current->output_size()) &&
         !current->output(index).empty() &&
         used.contains(current->output(index));
}

void GraphImporter::defineInts(unsigned index, SmallVector<int64_t> vals) {
  SmallVector<int64_t> shape = {static_cast<int64_t>(vals.size())};
  if (auto inferred = inferredShape(index))
    if (product(*inferred) == static_cast<int64_t>(vals.size()))
      shape = *inferred;
  defineConst(index, ConstTensor::ofInts(shape, std::vector<int64_t>(
                                                    vals.begin(), vals.end())));
}

void GraphImporter::defineConst(unsigned index, ConstTensor value) {
  consts[current->output(index)] = std::move(value);
}

Value GraphImporter::materialize(const ConstTensor &c) {
  int64_t n = c.numElements();
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i)
    data[i] = static_cast<float>(c.get(i));
  auto f32 = b.getF32Type();
  bool splat = n > 0 && llvm::all_equal(data);
  if (splat || n <= 1) {
    auto type = RankedTensorType::get(c.shape, f32);
    ArrayRef<float> values =
        splat ? ArrayRef<float>(data[0]) : ArrayRef<float>(data);
    return ConstantOp::create(b, currentLoc,
                              DenseElementsAttr::get(type, values));
  }
  // Dimensions along which the tensor repeats (a mask expanded to the batch)
  // are kept as size 1 and re-expanded by `loom.expand`.
  SmallVector<int64_t> strides = stridesOf(c.shape);
  SmallVector<int64_t> reduced(c.shape);
  for (auto [d, size] : llvm::enumerate(c.shape)) {
    if (size <= 1)
      continue;
    bool repeats = true;
    for (int64_t i = 0; repeats && i < n; ++i) {
      int64_t coord = (i / strides[d]) % size;
      repeats = coord == 0 || data[i] == data[i - coord * strides[d]];
    }
    if (repeats)
      reduced[d] = 1;
  }
  if (reduced == c.shape)
    return ConstantOp::create(
        b, currentLoc,
        DenseElementsAttr::get(RankedTensorType::get(c.shape, f32),
                               ArrayRef<float>(data)));
  std::vector<float> small;
  small.reserve(product(reduced));
  SmallVector<int64_t> smallStrides = stridesOf(reduced);
  for (int64_t j = 0, m = product(reduced); j < m; ++j) {
    int64_t src = 0;
    for (size_t d = 0; d < reduced.size(); ++d)
      src += ((j / smallStrides[d]) % reduced[d]) * strides[d];
    small.push_back(data[src]);
  }
  Value base = ConstantOp::create(
      b, currentLoc,
      DenseElementsAttr::get(RankedTensorType::get(reduced, f32),
                             ArrayRef<float>(small)));
  SmallVector<int64_t> spec;
  for (auto [r, full] : llvm::zip(reduced, c.shape))
    spec.push_back(r == full ? -1 : full);
  return ExpandOp::create(b, currentLoc, base, b.getDenseI64ArrayAttr(spec));
}

const onnx::AttributeProto *GraphImporter::attr(StringRef name) const {
  for (const auto &a : current->attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t GraphImporter::intAttr(StringRef name, int64_t dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : dflt;
}

float GraphImporter::floatAttr(StringRef name, float dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->f() : dflt;
}
