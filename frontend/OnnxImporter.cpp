//===- OnnxImporter.cpp - ONNX models into the loom dialect -----*- C++ -*-===//
//
// Loading (binary protobuf or ONNX text syntax), shape options, ONNX's
// checker and shape inference, then `GraphImporter`. This is the exception
// boundary: ONNX throws, MLIR must never see an exception, so
// `importOnnxFile` catches everything and reports it as a diagnostic.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "ir/ErrorKind.h"
#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include <exception>
#include <regex>
#include <unordered_map>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

namespace {
constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 17;
} // namespace

/// ONNX messages span lines; diagnostics are one line, lowercase first letter,
/// no trailing period.
static std::string oneLine(StringRef message) {
  std::string out;
  bool space = false;
  for (char c : message) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  while (!out.empty() && out.back() == '.')
    out.pop_back();
  if (!out.empty() && std::isupper(static_cast<unsigned char>(out[0])) &&
      !(out.size() > 1 && std::isupper(static_cast<unsigned char>(out[1]))))
    out[0] =
        static_cast<char>(std::tolower(static_cast<unsigned char>(out[0])));
  return out;
}

/// Blanks lines whose first non-blank characters are `//` (lit's RUN and
/// CHECK lines), keeping line numbers. ONNX 1.12's parser only knows `#`.
static std::string stripSlashComments(StringRef text) {
  std::string out;
  out.reserve(text.size());
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (auto [i, line] : llvm::enumerate(lines)) {
    if (i)
      out += '\n';
    if (!line.ltrim().starts_with("//"))
      out += line;
  }
  return out;
}

static FailureOr<onnx::ModelProto> parseModel(MLIRContext *ctx, StringRef path,
                                              bool isText, std::string &text) {
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/true);
  if (!buffer)
    return emitError(fileLoc) << "cannot open '" << path
                              << "': " << oneLine(buffer.getError().message());
  onnx::ModelProto model;
  if (isText) {
    text = stripSlashComments((*buffer)->getBuffer());
    onnx::Status status = onnx::OnnxParser::Parse(model, text.c_str());
    if (!status.IsOK()) {
      // "[ParseError at position (line: L column: C)]\nError context: ...\n
      // REASON": keep the reason, put the position into the location.
      std::string message = status.ErrorMessage();
      std::smatch match;
      Location loc = fileLoc;
      std::string where;
      if (std::regex_search(message, match,
                            std::regex(R"(\(line: (\d+) column: (\d+)\))"))) {
        unsigned line = std::stoul(match[1]), col = std::stoul(match[2]);
        loc = FileLineColLoc::get(ctx, path, line, col);
        where = " at line " + match[1].str() + ", column " + match[2].str();
      }
      StringRef reason = message;
      size_t lastLine = reason.rtrim().rfind('\n');
      if (lastLine != StringRef::npos)
        reason = reason.drop_front(lastLine + 1);
      return emitError(loc)
             << "cannot parse '" << path
             << "' as an ONNX model: " << oneLine(reason) << where;
    }
    return model;
  }
  StringRef bytes = (*buffer)->getBuffer();
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return emitError(fileLoc)
           << "cannot parse '" << path
           << "' as an ONNX model: not a valid protobuf message (truncated "
              "or not an ONNX file)";
  if (!model.has_graph() || model.ir_version() == 0)
    return emitError(fileLoc) << "cannot parse '" << path
                              << "' as an ONNX model: no graph or IR version "
                                 "(empty or not an ONNX file)";
  return model;
}

static FailureOr<int64_t> defaultOpset(Location loc, StringRef path,
                                       const onnx::ModelProto &model) {
  for (const auto &imp : model.opset_import()) {
    if (!imp.domain().empty() && imp.domain() != "ai.onnx")
      continue;
    if (imp.version() < kMinOpset || imp.version() > kMaxOpset) {
      recordErrorKind(ErrorKind::Unsupported);
      return emitError(loc)
             << "model '" << path << "' uses ONNX opset " << imp.version()
             << "; supported opsets are " << kMinOpset << "-" << kMaxOpset;
    }
    return imp.version();
  }
  return emitError(loc) << "model '" << path
                        << "' imports no opset of the default ONNX domain";
}

static bool isGraphInput(const onnx::GraphProto &graph,
                         const llvm::StringSet<> &initializers,
                         StringRef name) {
  if (initializers.contains(name))
    return false;
  return llvm::any_of(graph.input(),
                      [&](const auto &in) { return in.name() == name; });
}

static int64_t staticDim0(const onnx::ValueInfoProto &info) {
  if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape())
    return -1;
  const auto &shape = info.type().tensor_type().shape();
  if (shape.dim_size() == 0 || !shape.dim(0).has_dim_value())
    return -1;
  return shape.dim(0).dim_value();
}

/// Rewrites every `Reshape` whose input and output shapes are static under the
/// model's own input shapes to the batch-agnostic specification of that
/// reshape. This is the identity on the model as exported, and makes a batch
/// baked into a constant shape (`[64, 784]`) follow a new batch size.
static void retargetReshapes(onnx::ModelProto &model, int64_t opset) {
  onnx::GraphProto &graph = *model.mutable_graph();
  try {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(false, 0, true));
  } catch (const std::exception &) {
    // The real inference after the overrides reports problems.
    graph.clear_value_info();
    return;
  }
  llvm::StringMap<SmallVector<int64_t>> shapes;
  auto record = [&](const onnx::ValueInfoProto &info) {
    if (!info.type().has_tensor_type() ||
        !info.type().tensor_type().has_shape())
      return;
    SmallVector<int64_t> shape;
    for (const auto &d : info.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value())
        return;
      shape.push_back(d.dim_value());
    }
    shapes[info.name()] = shape;
  };
  for (const auto &info : graph.input())
    record(info);
  for (const auto &info : graph.value_info())
    record(info);
  for (const auto &info : graph.output())
    record(info);
  llvm::StringSet<> names;
  for (const auto &init : graph.initializer())
    names.insert(init.name());
  for (const auto &node : graph.node())
    for (const auto &out : node.output())
      names.insert(out);

  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() != "Reshape" ||
        (!node.domain().empty() && node.domain() != "ai.onnx") ||
        node.input_size() < 1 || node.output_size() < 1)
      continue;
    auto in = shapes.find(node.input(0));
    auto out = shapes.find(node.output(0));
    if (in == shapes.end() || out == shapes.end())
      continue;
    SmallVector<int64_t> spec =
        batchAgnosticReshapeSpec(in->second, out->second);
    bool allowZero = false;
    for (const auto &a : node.attribute())
      if (a.name() == "allowzero" && a.i() != 0)
        allowZero = true;
    if (allowZero && llvm::is_contained(spec, 0))
      continue;
    if (opset < 5) {
      for (auto &a : *node.mutable_attribute())
        if (a.name() == "shape") {
          a.clear_ints();
          for (int64_t d : spec)
            a.add_ints(d);
        }
      continue;
    }
    if (node.input_size() < 2)
      continue;
    std::string name = node.output(0) + "_loom_shape";
    for (int i = 1; names.contains(name); ++i)
      name = node.output(0) + "_loom_shape" + std::to_string(i);
    names.insert(name);
    onnx::TensorProto *init = graph.add_initializer();
    init->set_name(name);
    init->set_data_type(onnx::TensorProto::INT64);
    init->add_dims(static_cast<int64_t>(spec.size()));
    for (int64_t d : spec)
      init->add_int64_data(d);
    if (model.ir_version() < 4) {
      // Before IR 4, initializers must also be graph inputs.
      onnx::ValueInfoProto *input = graph.add_input();
      input->set_name(name);
      auto *tensor = input->mutable_type()->mutable_tensor_type();
      tensor->set_elem_type(onnx::TensorProto::INT64);
      tensor->mutable_shape()->add_dim()->set_dim_value(spec.size());
    }
    node.set_input(1, name);
  }
  graph.clear_value_info();
}

/// Applies `batchSize` and `inputShapes` to the graph inputs.
static LogicalResult applyShapeOptions(Location loc, StringRef path,
                                       onnx::ModelProto &model, int64_t opset,
                                       const OnnxImportOptions &options,
                                       BatchChange &batchChange) {
  onnx::GraphProto &graph = *model.mutable_graph();
  llvm::StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());

  SmallVector<StringRef> names;
  for (const auto &entry : options.inputShapes)
    names.push_back(entry.getKey());
  llvm::sort(names);
  for (StringRef name : names) {
    if (isGraphInput(graph, initializers, name))
      continue;
    if (initializers.contains(name))
      return emitError(loc) << "cannot set the shape of '" << name
                            << "': it is an initializer, not a graph input";
    std::string known;
    for (const auto &in : graph.input())
      if (!initializers.contains(in.name()))
        known += (known.empty() ? "" : ", ") + in.name();
    return emitError(loc) << "cannot set the shape of unknown input '" << name
                          << "'; the graph inputs of '" << path
                          << "' are: " << known;
  }
  if (options.batchSize && *options.batchSize <= 0)
    return emitError(loc) << "batch size must be positive, got "
                          << *options.batchSize;

  // Does the batch of some input change from a static value?
  bool batchChanges = false;
  for (const auto &in : graph.input()) {
    if (initializers.contains(in.name()))
      continue;
    int64_t old = staticDim0(in);
    auto shape = options.inputShapes.find(in.name());
    int64_t now = shape != options.inputShapes.end()
                      ? (shape->second.empty() ? -1 : shape->second[0])
                  : options.batchSize ? *options.batchSize
                                      : old;
    batchChanges |= old >= 0 && now != old;
    if (now >= 0 && now != old && batchChange.imported < 0)
      batchChange = {old, now};
  }
  if (batchChanges) {
    retargetReshapes(model, opset);
    for (const auto &init : graph.initializer())
      initializers.insert(init.name());
  }

  bool changed = false;
  for (onnx::ValueInfoProto &in : *graph.mutable_input()) {
    if (initializers.contains(in.name()))
      continue;
    auto *tensor = in.mutable_type()->mutable_tensor_type();
    auto shape = options.inputShapes.find(in.name());
    if (shape != options.inputShapes.end()) {
      if (tensor->has_shape() &&
          tensor->shape().dim_size() != static_cast<int>(shape->second.size()))
        return emitError(loc)
               << "input shape for '" << in.name() << "' has rank "
               << shape->second.size() << " but the model's input has rank "
               << tensor->shape().dim_size();
      if (llvm::any_of(shape->second, [](int64_t d) { return d < 0; }))
        return emitError(loc) << "input shape for '" << in.name()
                              << "' has a negative dimension";
      tensor->mutable_shape()->clear_dim();
      for (int64_t d : shape->second)
        tensor->mutable_shape()->add_dim()->set_dim_value(d);
      changed = true;
      continue;
    }
    if (options.batchSize && tensor->has_shape() &&
        tensor->shape().dim_size() > 0) {
      tensor->mutable_shape()->mutable_dim(0)->set_dim_value(
          *options.batchSize);
      changed = true;
    }
  }
  if (changed) {
    // Shapes recorded under the old input shapes would clash with the new
    // ones during inference; let inference recompute them.
    graph.clear_value_info();
    std::unordered_map<std::string, const onnx::TypeProto *> inputTypes;
    for (const onnx::ValueInfoProto &in : graph.input())
      inputTypes[in.name()] = &in.type();
    for (onnx::ValueInfoProto &out : *graph.mutable_output()) {
      // An output that is a graph input takes the input's (new) type.
      if (auto it = inputTypes.find(out.name()); it != inputTypes.end()) {
        out.mutable_type()->CopyFrom(*it->second);
        continue;
      }
      if (!out.type().has_tensor_type() ||
          !out.type().tensor_type().has_shape())
        continue;
      // The checker wants a shape; keep the rank, forget the sizes.
      auto *shape = out.mutable_type()->mutable_tensor_type()->mutable_shape();
      for (auto &dim : *shape->mutable_dim()) {
        dim.clear_dim_value();
        dim.clear_dim_param();
      }
    }
  }
  return success();
}

/// The bytes of one element of `dataType` in raw_data, or 0 for types not
/// stored that way (strings, complex).
static int64_t rawElementBytes(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    return 1;
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
  case onnx::TensorProto::DOUBLE:
    return 8;
  default:
    return 0;
  }
}

/// Whether a tensor stored in the model holds as many elements as its dims
/// say, where it holds any (external data is checked where it is read).
static bool holdsItsElements(const onnx::TensorProto &t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL ||
      t.external_data_size() > 0)
    return true;
  int64_t n = 1;
  for (int64_t d : t.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return false;
  if (t.has_raw_data()) {
    int64_t bytes = rawElementBytes(t.data_type());
    return bytes == 0 || (n <= INT64_MAX / bytes &&
                          static_cast<int64_t>(t.raw_data().size()) == n * bytes);
  }
  int64_t held = t.float_data_size() + t.int32_data_size() +
                 t.int64_data_size() + t.double_data_size() +
                 t.uint64_data_size() + t.string_data_size();
  return held == 0 || held == n;
}

/// Every tensor stored in the model (initializers, node attributes) holds
/// as many elements as its dims say: ONNX's data propagation reads a
/// Constant's elements by its dims. Before external data is resolved (its
/// bytes are checked as they are read).
static LogicalResult checkStoredTensors(Location loc,
                                        const onnx::ModelProto &model) {
  for (const onnx::TensorProto &t : model.graph().initializer())
    if (!holdsItsElements(t))
      return emitError(loc) << "initializer '" << t.name()
                            << "' holds a different number of elements than "
                               "its dims say";
  for (auto [index, node] : llvm::enumerate(model.graph().node()))
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.has_t() && !holdsItsElements(a.t()))
        return emitError(loc)
               << node.op_type() << " at node '"
               << nodeName(node, static_cast<int>(index)) << "': attribute "
               << a.name()
               << " holds a different number of elements than its dims say";
  return success();
}

/// What ONNX 1.12's shape inference assumes of a model but its checker
/// does not check, checked or made to hold before inference runs (it reads
/// out of bounds or divides by zero otherwise): every input the operator
/// requires is named (not ""); the windows of Conv, ConvTranspose and the
/// pools have strides, dilations and kernel sizes of at least 1 and pads of
/// at least 0; and a Conv or ConvTranspose without `kernel_shape` gets the
/// spatial dims of its initializer weight (the operator's own default),
/// which inference otherwise reads without checking them against the
/// input's rank.
static LogicalResult prepareForInference(Location loc, onnx::ModelProto &model,
                                         int64_t opset) {
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &t : model.graph().initializer())
    initializers[t.name()] = &t;
  static const llvm::StringSet<> windowed = {"Conv", "ConvTranspose", "MaxPool",
                                             "AveragePool", "LpPool"};
  for (auto [index, node] :
       llvm::enumerate(*model.mutable_graph()->mutable_node())) {
    std::string name = nodeName(node, static_cast<int>(index));
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
        node.op_type(), static_cast<int>(opset), node.domain());
    if (schema)
      for (int k = 0; k < std::min(schema->min_input(), node.input_size()); ++k)
        if (node.input(k).empty())
          return emitError(loc) << node.op_type() << " at node '" << name
                                << "': its required input " << k
                                << " is not given (an empty name)";
    if (!windowed.contains(node.op_type()))
      continue;
    bool hasKernel = false;
    for (const onnx::AttributeProto &a : node.attribute()) {
      hasKernel |= a.name() == "kernel_shape";
      int64_t least = a.name() == "pads" ? 0 : 1;
      if (a.name() != "strides" && a.name() != "dilations" &&
          a.name() != "kernel_shape" && a.name() != "pads")
        continue;
      for (int64_t v : a.ints())
        if (v < least)
          return emitError(loc)
                 << node.op_type() << " at node '" << name << "': "
                 << a.name() << " holds " << v << "; each must be at least "
                 << least;
    }
    if (hasKernel || node.input_size() < 2 ||
        (node.op_type() != "Conv" && node.op_type() != "ConvTranspose"))
      continue;
    auto weight = initializers.find(node.input(1));
    if (weight == initializers.end() || weight->second->dims_size() < 3)
      continue;
    onnx::AttributeProto *kernel = node.add_attribute();
    kernel->set_name("kernel_shape");
    kernel->set_type(onnx::AttributeProto::INTS);
    for (int d = 2; d < weight->second->dims_size(); ++d)
      kernel->add_ints(weight->second->dims(d));
  }
  return success();
}

static std::string absolutePath(StringRef path) {
  SmallString<256> abs(path);
  (void)llvm::sys::fs::make_absolute(abs);
  llvm::sys::path::remove_dots(abs, /*remove_dot_dot=*/true);
  return std::string(abs);
}

static OwningOpRef<ModuleOp> importImpl(MLIRContext *ctx, StringRef path,
                                        const OnnxImportOptions &options) {
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  bool isText = path.ends_with(".onnxtext");
  std::string text;
  auto parsed = parseModel(ctx, path, isText, text);
  if (failed(parsed))
    return nullptr;
  onnx::ModelProto &model = *parsed;
  auto opset = defaultOpset(fileLoc, path, model);
  if (failed(opset))
    return nullptr;
  if (failed(checkStoredTensors(fileLoc, model)))
    return nullptr;
  auto external =
      resolveExternalData(fileLoc, path, model, options.allowMissingWeights);
  if (failed(external))
    return nullptr;
  // Checked before any shape inference runs on it: ONNX's inference
  // assumes a model its checker accepts.
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    emitError(fileLoc) << "invalid ONNX model '" << path
                       << "': " << oneLine(e.what());
    return nullptr;
  }
  if (failed(prepareForInference(fileLoc, model, *opset)))
    return nullptr;
  BatchChange batchChange;
  if (failed(applyShapeOptions(fileLoc, path, model, *opset, options,
                               batchChange)))
    return nullptr;
  // Data propagation also computes the values of small integer tensors
  // (shape subgraphs: Shape, Gather, Unsqueeze, Concat, ...).
  std::unordered_map<std::string, onnx::TensorShapeProto> shapeData;
  try {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type=*/false, /*strict_mode=*/0,
                                    /*data_prop=*/true),
        &shapeData);
  } catch (const std::exception &e) {
    emitError(fileLoc) << "ONNX shape inference failed on '" << path
                       << "': " << oneLine(e.what());
    return nullptr;
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  Builder b(ctx);
  (*module)->setAttr(attr::kModelPath, b.getStringAttr(absolutePath(path)));
  (*module)->setAttr(attr::kOpset, b.getI64IntegerAttr(*opset));
  SourceLocator locator(ctx, path, text);
  llvm::StringMap<SmallVector<int64_t>> folded;
  for (const auto &[name, data] : shapeData) {
    SmallVector<int64_t> values;
    for (const auto &dim : data.dim())
      if (dim.has_dim_value())
        values.push_back(dim.dim_value());
    if (static_cast<int>(values.size()) == data.dim_size())
      folded[name] = std::move(values);
  }
  auto roles = classifyInitializers(fileLoc, model, *external,
                                    options.trainPattern,
                                    options.freezePattern);
  if (failed(roles))
    return nullptr;
  if (!roles->tied.empty()) {
    SmallVector<NamedAttribute> tied;
    for (const auto &[copy, tie] : roles->tied) {
      SmallVector<NamedAttribute> fields = {
          b.getNamedAttr("of", b.getStringAttr(tie.parameter))};
      if (tie.transposed)
        fields.push_back(b.getNamedAttr("transposed", b.getUnitAttr()));
      tied.push_back(b.getNamedAttr(copy, b.getDictionaryAttr(fields)));
    }
    (*module)->setAttr(attr::kTied, b.getDictionaryAttr(tied));
  }
  GraphImporter importer(ctx, model, locator, *opset, std::move(folded),
                         std::move(*external), std::move(*roles));
  importer.setBatchChange(batchChange);
  if (failed(importer.importInto(*module)))
    return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp>
mlir::loom::importOnnxFile(MLIRContext *ctx, StringRef path,
                           const OnnxImportOptions &options) {
  ctx->loadDialect<LoomDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  try {
    return importImpl(ctx, path, options);
  } catch (const std::exception &e) {
    emitError(fileLoc) << "cannot import '" << path
                       << "': " << oneLine(e.what());
  } catch (...) {
    emitError(fileLoc) << "cannot import '" << path << "': unknown exception";
  }
  return nullptr;
}

std::string mlir::loom::listSupportedOnnxOps() {
  std::string out;
  llvm::raw_string_ostream os(out);
  for (const OpConverter &c : getOpConverters())
    os << c.opType << "  " << c.minOpset << "-" << c.maxOpset << "\n";
  return out;
}
