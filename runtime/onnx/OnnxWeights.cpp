//===- OnnxWeights.cpp - Initializers of an ONNX model -----------*- C++ -*-===//

#include "runtime/onnx/OnnxWeights.h"

#include "runtime/support/AtomicFile.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <unordered_map>

namespace loom::runtime {

namespace {

std::string dirName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status parseModel(const std::string &path, onnx::ModelProto &model) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError("cannot open ONNX model '%s': %s", path.c_str(),
                     std::strerror(errno));
  if (!model.ParseFromIstream(&in))
    return makeError("%s: not a valid ONNX model (protobuf parse failed)",
                     path.c_str());
  return Status::ok();
}

/// Parses an external data `offset` or `length` entry.
StatusOr<int64_t> parseSize(const onnx::TensorProto &t, const char *key,
                            const std::string &value) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (errno || end == value.c_str() || *end != '\0' || v < 0)
    return makeError("initializer '%s' has a bad external data %s '%s'",
                     t.name().c_str(), key, value.c_str());
  return static_cast<int64_t>(v);
}

/// The bytes of an external-data tensor: `length` bytes (default: to the end
/// of the file) at `offset` of `location`, relative to the model's folder.
StatusOr<std::string> readExternal(const std::string &modelDir,
                                   const onnx::TensorProto &t) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      LOOM_ASSIGN_OR_RETURN(offset, parseSize(t, "offset", kv.value()));
    } else if (kv.key() == "length") {
      LOOM_ASSIGN_OR_RETURN(length, parseSize(t, "length", kv.value()));
    }
  }
  if (location.empty())
    return makeError("initializer '%s' has external data without a location",
                     t.name().c_str());
  std::string file =
      location[0] == '/' ? location : modelDir + "/" + location;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return makeError("initializer '%s' stores its data in '%s', which cannot "
                     "be opened: %s",
                     t.name().c_str(), file.c_str(), std::strerror(errno));
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  if (length < 0)
    length = std::max<int64_t>(size - offset, 0);
  if (offset + length > size)
    return makeError("initializer '%s' needs bytes [%lld, %lld) of '%s', "
                     "which has only %lld bytes",
                     t.name().c_str(), (long long)offset,
                     (long long)(offset + length), file.c_str(),
                     (long long)size);
  std::string bytes(length, '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in)
    return makeError("cannot read the external data of initializer '%s' "
                     "from '%s'",
                     t.name().c_str(), file.c_str());
  return bytes;
}

template <typename Src, typename Dst>
void convert(const Src *src, Dst *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<Dst>(src[i]);
}

} // namespace

struct OnnxWeights::Impl {
  onnx::ModelProto model;
  std::unordered_map<std::string, const onnx::TensorProto *> byName;
};

OnnxWeights::OnnxWeights(std::string path)
    : modelPath(std::move(path)), impl(new Impl) {}
OnnxWeights::~OnnxWeights() = default;

StatusOr<std::unique_ptr<OnnxWeights>>
OnnxWeights::load(const std::string &modelPath) {
  std::unique_ptr<OnnxWeights> w(new OnnxWeights(modelPath));
  LOOM_RETURN_IF_ERROR(parseModel(modelPath, w->impl->model));
  for (const onnx::TensorProto &t : w->impl->model.graph().initializer())
    w->impl->byName.emplace(t.name(), &t);
  return w;
}

StatusOr<HostTensor> OnnxWeights::get(const std::string &name,
                                      ElemType type) const {
  auto it = impl->byName.find(name);
  if (it == impl->byName.end())
    return makeError("%s: no initializer named '%s'", modelPath.c_str(),
                     name.c_str());
  const onnx::TensorProto &t = *it->second;
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = numElements(shape);
  auto where = [&]() { return modelPath + ": initializer '" + name + "'"; };

  // The raw little-endian bytes, when the tensor stores them that way.
  std::string raw;
  bool haveRaw = false;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    LOOM_ASSIGN_OR_RETURN(raw, readExternal(dirName(modelPath), t));
    haveRaw = true;
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
    haveRaw = true;
  }

  int srcSize = 0;
  bool srcFloat = false;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    srcSize = 4, srcFloat = true;
    break;
  case onnx::TensorProto::DOUBLE:
    srcSize = 8, srcFloat = true;
    break;
  case onnx::TensorProto::INT32:
    srcSize = 4;
    break;
  case onnx::TensorProto::INT64:
    srcSize = 8;
    break;
  default:
    return makeError("%s has unsupported data type %d", where().c_str(),
                     t.data_type());
  }
  if (type != ElemType::F32 && type != ElemType::I64)
    return makeError("%s: initializers load as float32 or int64 only, not %s",
                     where().c_str(), elemTypeName(type));
  if (srcFloat != (type == ElemType::F32))
    return makeError("%s is %s but the plan expects %s", where().c_str(),
                     srcFloat ? "floating point" : "integer",
                     elemTypeName(type));

  HostTensor out(type, shape);
  if (haveRaw) {
    if ((int64_t)raw.size() != n * srcSize)
      return makeError("%s has %zu data bytes, expected %lld for shape %s",
                       where().c_str(), raw.size(), (long long)(n * srcSize),
                       shapeToString(shape).c_str());
    std::vector<uint8_t> aligned(raw.begin(), raw.end());
    const void *src = aligned.data();
    switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      convert(static_cast<const float *>(src), out.data<float>(), n);
      break;
    case onnx::TensorProto::DOUBLE:
      convert(static_cast<const double *>(src), out.data<float>(), n);
      break;
    case onnx::TensorProto::INT32:
      convert(static_cast<const int32_t *>(src), out.data<int64_t>(), n);
      break;
    default:
      convert(static_cast<const int64_t *>(src), out.data<int64_t>(), n);
    }
    return out;
  }
  int64_t have = 0;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    have = t.float_data_size();
    if (have == n)
      convert(t.float_data().data(), out.data<float>(), n);
    break;
  case onnx::TensorProto::DOUBLE:
    have = t.double_data_size();
    if (have == n)
      convert(t.double_data().data(), out.data<float>(), n);
    break;
  case onnx::TensorProto::INT32:
    have = t.int32_data_size();
    if (have == n)
      convert(t.int32_data().data(), out.data<int64_t>(), n);
    break;
  default:
    have = t.int64_data_size();
    if (have == n)
      convert(t.int64_data().data(), out.data<int64_t>(), n);
  }
  if (have != n)
    return makeError("%s has %lld values, expected %lld for shape %s",
                     where().c_str(), (long long)have, (long long)n,
                     shapeToString(shape).c_str());
  return out;
}

Status exportOnnxWithWeights(const std::string &modelPath,
                             const std::map<std::string, HostTensor> &values,
                             const std::string &outPath) {
  onnx::ModelProto model;
  LOOM_RETURN_IF_ERROR(parseModel(modelPath, model));
  std::string modelDir = dirName(modelPath);
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    auto it = values.find(t.name());
    if (it != values.end()) {
      const HostTensor &v = it->second;
      if (v.type != ElemType::F32)
        return makeError("exported value of '%s' must be float32",
                         t.name().c_str());
      t.clear_float_data();
      t.clear_double_data();
      t.clear_external_data();
      t.clear_dims();
      for (int64_t d : v.shape)
        t.add_dims(d);
      t.set_data_type(onnx::TensorProto::FLOAT);
      t.set_data_location(onnx::TensorProto::DEFAULT);
      t.set_raw_data(std::string(v.bytes.begin(), v.bytes.end()));
      continue;
    }
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      LOOM_ASSIGN_OR_RETURN(std::string bytes, readExternal(modelDir, t));
      t.clear_external_data();
      t.set_data_location(onnx::TensorProto::DEFAULT);
      t.set_raw_data(bytes);
    }
  }
  // A parameter the exporter wrote as `Identity` of an equal one (eval-mode
  // exports deduplicate) becomes an initializer of its own again.
  onnx::GraphProto &graph = *model.mutable_graph();
  std::set<std::string> present;
  for (const onnx::TensorProto &t : graph.initializer())
    present.insert(t.name());
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto &node = graph.node(i);
    if (node.op_type() != "Identity" || node.output_size() != 1 ||
        present.count(node.output(0)))
      continue;
    auto it = values.find(node.output(0));
    if (it == values.end())
      continue;
    const HostTensor &v = it->second;
    if (v.type != ElemType::F32)
      return makeError("exported value of '%s' must be float32",
                       node.output(0).c_str());
    onnx::TensorProto *t = graph.add_initializer();
    t->set_name(node.output(0));
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : v.shape)
      t->add_dims(d);
    t->set_raw_data(std::string(v.bytes.begin(), v.bytes.end()));
    graph.mutable_node()->DeleteSubrange(i, 1);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return makeError("cannot serialize ONNX model '%s' (over 2 GiB?)",
                     outPath.c_str());
  return writeFileAtomically(outPath, bytes);
}

} // namespace loom::runtime
