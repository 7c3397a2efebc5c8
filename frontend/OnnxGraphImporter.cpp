//===- OnnxGraphImporter.cpp - ONNX graph to loom ops -----------*- C++ -*-===//
//
// Walks a checked and shape-inferred ONNX graph in node order and builds
// `func.func @main`. Graph inputs become `loom.input` arguments, float32
// initializers used as data become `loom.param` arguments (initializer
// order), integer tensors are kept aside as shape operands.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include "onnx/defs/tensor_proto_util.h"

#include <cctype>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

//===----------------------------------------------------------------------===//
// Names and source positions
//===----------------------------------------------------------------------===//

std::string onnx_import::nodeName(const onnx::NodeProto &node, int index) {
  if (!node.name().empty())
    return node.name();
  return node.op_type() + "_" + std::to_string(index);
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
                             llvm::StringMap<SmallVector<int64_t>> folded)
    : ctx(ctx), model(model), locator(locator), opsetVersion(opset), b(ctx),
      folded(std::move(folded)), currentLoc(UnknownLoc::get(ctx)) {
  const onnx::GraphProto &graph = model.graph();
  for (const auto &info : graph.input())
    known[info.name()].type = &info.type();
  for (const auto &info : graph.value_info())
    known[info.name()].type = &info.type();
  for (const auto &info : graph.output())
    known[info.name()].type = &info.type();
  for (const auto &init : graph.initializer())
    known[init.name()].initializer = &init;
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
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

FailureOr<RankedTensorType>
GraphImporter::staticF32Type(StringRef name, Location loc, StringRef role,
                             StringRef where) {
  auto it = known.find(name);
  if (it == known.end() || !it->second.type)
    return emitError(loc) << role << " '" << name << "'" << where
                          << " has no type (ONNX shape inference found none)";
  const onnx::TypeProto &type = *it->second.type;
  if (type.has_tensor_type() &&
      type.tensor_type().elem_type() != onnx::TensorProto::FLOAT)
    return emitError(loc) << role << " '" << name << "'" << where
                          << " has element type "
                          << elementTypeName(type.tensor_type().elem_type())
                          << "; only float32 is supported";
  std::string why;
  auto shape = staticShapeOf(type, why);
  if (failed(shape))
    return emitError(loc) << role << " '" << name << "'" << where << " "
                          << why;
  return RankedTensorType::get(*shape, Float32Type::get(ctx));
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
      where = " at node '" + nodeName(graph.node(use->second), use->second) +
              "'";
    }
    auto type = staticF32Type(input.name(), loc, "graph input", where);
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
    if (init.data_type() != onnx::TensorProto::FLOAT)
      continue;
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    argTypes.push_back(RankedTensorType::get(shape, Float32Type::get(ctx)));
    argLocs.push_back(locator.valueLoc(init.name()));
    argRoles.push_back({attr::kParam, init.name()});
  }

  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, locator.fileLoc(), "main",
                                   b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [i, role] : llvm::enumerate(argRoles)) {
    BlockArgument arg = entry->getArgument(i);
    arg.setLoc(argLocs[i]);
    func.setArgAttr(i, role.first, b.getStringAttr(role.second));
    values[role.second] = arg;
  }
  b.setInsertionPointToStart(entry);

  for (auto [i, node] : llvm::enumerate(graph.node())) {
    current = &node;
    currentName = nodeName(node, static_cast<int>(i));
    currentLoc = nodeLocs[i];
    const OpConverter *conv = lookupOpConverter(node.op_type(), opsetVersion);
    if (!conv) {
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
    auto it = values.find(output.name());
    if (it == values.end()) {
      if (ints.count(output.name()) || known[output.name()].initializer)
        return emitError(loc) << "graph output '" << output.name()
                              << "' is not a float32 tensor; only float32 "
                                 "graph outputs are supported";
      return emitError(loc) << "graph output '" << output.name()
                            << "' is not produced by any node";
    }
    if (output.type().has_tensor_type() &&
        output.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT)
      return emitError(loc)
             << "graph output '" << output.name() << "' has element type "
             << elementTypeName(output.type().tensor_type().elem_type())
             << "; only float32 is supported";
    results.push_back(it->second);
  }
  func::ReturnOp::create(b, locator.fileLoc(), results);
  func.setType(b.getFunctionType(entry->getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, attr::kOutput, b.getStringAttr(output.name()));

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

//===----------------------------------------------------------------------===//
// Services for op converters
//===----------------------------------------------------------------------===//

InFlightDiagnostic GraphImporter::error(const Twine &what,
                                         const Twine &detail) {
  InFlightDiagnostic diag = emitError(currentLoc)
                            << what << " at node '" << currentName << "'";
  if (!detail.isTriviallyEmpty())
    diag << ": " << detail;
  return diag;
}

bool GraphImporter::hasInput(unsigned index) const {
  return index < static_cast<unsigned>(current->input_size()) &&
         !current->input(index).empty();
}

FailureOr<Value> GraphImporter::data(unsigned index) {
  if (!hasInput(index))
    return error(llvm::formatv("{0} is missing input {1}", current->op_type(),
                               index));
  const std::string &name = current->input(index);
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  const onnx::TensorProto *init = known[name].initializer;
  if (ints.count(name) ||
      (init && init->data_type() != onnx::TensorProto::FLOAT))
    return error("tensor '" + name + "' of element type " +
                     (init ? elementTypeName(init->data_type())
                           : std::string("int64")) +
                     " is used as data",
                 "only float32 tensors are data; integer tensors are only "
                 "supported as shape operands");
  return error("value '" + name + "' is not defined");
}

FailureOr<SmallVector<int64_t>>
GraphImporter::intsOf(const onnx::TensorProto &tensor) {
  switch (tensor.data_type()) {
  case onnx::TensorProto::INT64: {
    auto data = onnx::ParseData<int64_t>(&tensor);
    return SmallVector<int64_t>(data.begin(), data.end());
  }
  case onnx::TensorProto::INT32: {
    auto data = onnx::ParseData<int32_t>(&tensor);
    return SmallVector<int64_t>(data.begin(), data.end());
  }
  default:
    return error("shape operand '" + tensor.name() + "' has element type " +
                     elementTypeName(tensor.data_type()),
                 "expected an integer tensor");
  }
}

FailureOr<SmallVector<int64_t>> GraphImporter::constInts(unsigned index) {
  if (!hasInput(index))
    return error(llvm::formatv("{0} is missing input {1}", current->op_type(),
                               index));
  const std::string &name = current->input(index);
  auto it = ints.find(name);
  if (it != ints.end())
    return it->second;
  if (const onnx::TensorProto *init = known[name].initializer) {
    auto parsed = intsOf(*init);
    if (succeeded(parsed))
      ints[name] = *parsed;
    return parsed;
  }
  return error("input '" + name + "' of " + current->op_type() +
                   " is computed at run time",
               "it must be a constant (an initializer or a Constant node)");
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
      conflict = dims[i].has_dim_value() &&
                 dims[i].dim_value() != type.getDimSize(i);
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
                       shapeString(type.getShape()));
    }
  }
  values[name] = value;
  return success();
}

LogicalResult GraphImporter::forward(unsigned in, unsigned out) {
  if (hasInput(in)) {
    const std::string &name = current->input(in);
    const onnx::TensorProto *init = known[name].initializer;
    if (ints.count(name) ||
        (init && (init->data_type() == onnx::TensorProto::INT64 ||
                  init->data_type() == onnx::TensorProto::INT32))) {
      auto vals = constInts(in);
      if (failed(vals))
        return failure();
      defineInts(out, *vals);
      return success();
    }
  }
  auto value = data(in);
  if (failed(value))
    return failure();
  return define(out, *value);
}

void GraphImporter::defineInts(unsigned index, SmallVector<int64_t> vals) {
  ints[current->output(index)] = std::move(vals);
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
