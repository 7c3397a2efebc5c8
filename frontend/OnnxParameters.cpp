//===- OnnxParameters.cpp - Which float initializers are trained -*- C++ -*-===//
//
// An ONNX file does not say which initializers are model parameters. The
// exporters' habits do:
//
// - a state-dict name (`transformer.h.0.attn.c_attn.weight`) is a parameter;
// - torch's folding writes the transposed weight of a bias-free Linear as
//   a new initializer `onnx::MatMul_470`: a parameter under another name,
//   and, when the Linear shares its weight with an embedding (GPT-2's
//   `lm_head`), a bit-for-bit transpose of another initializer: tied to it;
// - folded constants are scalars (Pow's exponent, GELU's 0.5, attention
//   scales) or exporter-named tensors fed to other ops (`onnx::Where_12`,
//   `/h.0/attn/Constant_output_0`): not parameters;
// - torch's eval-mode export writes parameters that are equal at export
//   (all-ones norm scales, zero biases) once, and the others as `Identity`
//   of it under their own names: each is a parameter of its own.
//
// `--train REGEX` and `--freeze REGEX` (matched against the whole name)
// override the rules, `--train` first.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include "onnx/defs/tensor_proto_util.h"

#include <cstring>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

std::optional<std::vector<float>> onnx_import::readFloatInitializer(
    Location loc, const onnx::TensorProto &init,
    const llvm::StringMap<ExternalTensor> &external) {
  SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
  int64_t n = product(shape);
  auto ext = external.find(init.name());
  if (ext != external.end()) {
    FailureOr<std::string> bytes =
        readExternalData(loc, init.name(), ext->second);
    if (failed(bytes) || static_cast<int64_t>(bytes->size()) != n * 4)
      return std::nullopt;
    std::vector<float> values(n);
    std::memcpy(values.data(), bytes->data(), bytes->size());
    return values;
  }
  // A parameter planned without its stored value (`--no-weights`) has a
  // stub; so does a float32 tensor whose external file is missing.
  if (init.data_location() == onnx::TensorProto::EXTERNAL ||
      (init.has_raw_data() &&
       static_cast<int64_t>(init.raw_data().size()) != n * 4))
    return std::nullopt;
  auto data = onnx::ParseData<float>(&init);
  if (static_cast<int64_t>(data.size()) != n)
    return std::nullopt;
  return std::vector<float>(data.begin(), data.end());
}

namespace {

/// Names torch.onnx gives to values it made: `onnx::Op_N` and the outputs
/// of graph nodes (`/path/Op_output_0`).
bool isExporterName(StringRef name) {
  return name.starts_with("onnx::") || name.starts_with("/");
}

/// The op type in an `onnx::Op_N` name.
StringRef exporterOpType(StringRef name) {
  StringRef rest = name;
  if (!rest.consume_front("onnx::"))
    return {};
  return rest.take_until([](char c) { return c == '_'; });
}

/// Ops whose folded initializer inputs are (transposed) weights.
bool takesWeights(StringRef opType) {
  return opType == "MatMul" || opType == "Gemm" || opType == "Conv" ||
         opType == "ConvTranspose";
}

bool isUniform(ArrayRef<float> values) {
  return llvm::all_of(values, [&](float v) {
    return std::memcmp(&v, &values.front(), sizeof(float)) == 0;
  });
}

llvm::hash_code hashFloats(ArrayRef<float> values) {
  return llvm::hash_combine_range(
      reinterpret_cast<const char *>(values.data()),
      reinterpret_cast<const char *>(values.data() + values.size()));
}

std::vector<float> transposed(ArrayRef<float> values, int64_t rows,
                              int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = values[r * cols + c];
  return out;
}

bool bitEqual(ArrayRef<float> a, ArrayRef<float> b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Full-name match of `pattern`, or failure with a diagnostic.
FailureOr<std::optional<llvm::Regex>> compile(Location loc, StringRef flag,
                                              StringRef pattern) {
  if (pattern.empty())
    return std::optional<llvm::Regex>();
  llvm::Regex re(("^(" + pattern + ")$").str());
  std::string why;
  if (!re.isValid(why))
    return emitError(loc) << "--" << flag << " '" << pattern
                          << "' is not a valid regular expression: " << why;
  return std::optional<llvm::Regex>(std::move(re));
}

} // namespace

FailureOr<InitializerRoles>
onnx_import::classifyInitializers(Location loc, const onnx::ModelProto &model,
                                  const llvm::StringMap<ExternalTensor> &external,
                                  StringRef trainPattern,
                                  StringRef freezePattern) {
  auto train = compile(loc, "train", trainPattern);
  auto freeze = compile(loc, "freeze", freezePattern);
  if (failed(train) || failed(freeze))
    return failure();

  InitializerRoles roles;
  std::vector<const onnx::TensorProto *> candidates, named;
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    if (init.data_type() != onnx::TensorProto::FLOAT)
      continue;
    StringRef name = init.name();
    if (*train && (*train)->match(name))
      continue;
    if (*freeze && (*freeze)->match(name)) {
      roles.constants[name] = "--freeze";
      if (!isExporterName(name))
        named.push_back(&init); // its copies are frozen with it
      continue;
    }
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    if (product(shape) <= 1) {
      roles.constants[name] = "a scalar";
      continue;
    }
    if (!isExporterName(name)) {
      named.push_back(&init);
      continue;
    }
    if (!takesWeights(exporterOpType(name))) {
      roles.constants[name] = "an exporter constant";
      continue;
    }
    candidates.push_back(&init);
  }

  // `Identity` of a parameter under a state-dict name: the exporter merged
  // two parameters that were equal at export; they train apart.
  llvm::StringSet<> inits;
  for (const onnx::TensorProto &init : model.graph().initializer())
    if (init.data_type() == onnx::TensorProto::FLOAT)
      inits.insert(init.name());
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (node.op_type() != "Identity" || node.input_size() != 1 ||
        node.output_size() != 1)
      continue;
    const std::string &in = node.input(0), &out = node.output(0);
    if (!inits.contains(in) || roles.constants.count(in) ||
        isExporterName(out) || inits.contains(out))
      continue;
    if (roles.deduplicated.try_emplace(out, in).second)
      roles.deduplicatedOrder.push_back(out);
  }

  // A folded weight that is bit for bit a named parameter, or its
  // transpose, is that parameter. Only same-sized named parameters are
  // read, and compared by hash first.
  if (candidates.empty())
    return roles;
  llvm::DenseMap<int64_t, SmallVector<const onnx::TensorProto *>> bySize;
  for (const onnx::TensorProto *p : named)
    bySize[product(SmallVector<int64_t>(p->dims().begin(), p->dims().end()))]
        .push_back(p);
  llvm::StringMap<std::optional<std::vector<float>>> cache;
  auto valuesOf = [&](const onnx::TensorProto &t)
      -> const std::optional<std::vector<float>> & {
    auto it = cache.find(t.name());
    if (it == cache.end())
      it = cache.try_emplace(t.name(), readFloatInitializer(loc, t, external))
               .first;
    return it->second;
  };
  for (const onnx::TensorProto *copy : candidates) {
    SmallVector<int64_t> shape(copy->dims().begin(), copy->dims().end());
    auto same = bySize.find(product(shape));
    if (same == bySize.end())
      continue;
    const auto &copyValues = valuesOf(*copy);
    if (!copyValues || isUniform(*copyValues))
      continue;
    std::optional<std::vector<float>> copyT;
    if (shape.size() == 2)
      copyT = transposed(*copyValues, shape[0], shape[1]);
    llvm::hash_code direct = hashFloats(*copyValues);
    std::optional<llvm::hash_code> flipped;
    if (copyT)
      flipped = hashFloats(*copyT);
    for (const onnx::TensorProto *param : same->second) {
      SmallVector<int64_t> pshape(param->dims().begin(), param->dims().end());
      bool sameShape = pshape == shape;
      bool flippedShape = shape.size() == 2 && pshape.size() == 2 &&
                          pshape[0] == shape[1] && pshape[1] == shape[0];
      if (!sameShape && !flippedShape)
        continue;
      const auto &values = valuesOf(*param);
      if (!values)
        continue;
      llvm::hash_code h = hashFloats(*values);
      if (sameShape && h == direct && bitEqual(*values, *copyValues)) {
        roles.tied[copy->name()] = {param->name(), /*transposed=*/false};
        break;
      }
      if (flippedShape && flipped && h == *flipped &&
          bitEqual(*values, *copyT)) {
        roles.tied[copy->name()] = {param->name(), /*transposed=*/true};
        break;
      }
    }
  }
  // A copy of a frozen parameter is as constant as the parameter.
  for (auto it = roles.tied.begin(); it != roles.tied.end();) {
    auto next = std::next(it);
    if (roles.constants.count(it->second.parameter)) {
      roles.constants[it->first()] = "a copy of frozen '" +
                                     it->second.parameter + "'";
      roles.tied.erase(it);
    }
    it = next;
  }
  return roles;
}
