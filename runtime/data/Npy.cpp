//===- Npy.cpp - Read and write NumPy .npy files ----------------*- C++ -*-===//

#include "runtime/data/Npy.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

namespace loom::runtime {

namespace {

const char kMagic[] = "\x93NUMPY";

/// Finds `'key':` in the header dict and returns the text after the colon.
bool findKey(const std::string &header, const std::string &key,
             std::string &rest) {
  for (char quote : {'\'', '"'}) {
    std::string pattern = std::string(1, quote) + key + quote;
    size_t pos = header.find(pattern);
    if (pos == std::string::npos)
      continue;
    pos = header.find(':', pos + pattern.size());
    if (pos == std::string::npos)
      return false;
    rest = header.substr(pos + 1);
    size_t start = rest.find_first_not_of(" \t");
    rest = start == std::string::npos ? "" : rest.substr(start);
    return true;
  }
  return false;
}

Status parseHeader(const std::string &header, const std::string &what,
                   std::string &descr, bool &fortran,
                   std::vector<int64_t> &shape) {
  std::string rest;
  if (!findKey(header, "descr", rest) || rest.empty() ||
      (rest[0] != '\'' && rest[0] != '"'))
    return makeError("%s: malformed .npy header (no 'descr')", what.c_str());
  size_t end = rest.find(rest[0], 1);
  if (end == std::string::npos)
    return makeError("%s: malformed .npy header (bad 'descr')", what.c_str());
  descr = rest.substr(1, end - 1);

  if (!findKey(header, "fortran_order", rest))
    return makeError("%s: malformed .npy header (no 'fortran_order')",
                     what.c_str());
  if (rest.compare(0, 4, "True") == 0)
    fortran = true;
  else if (rest.compare(0, 5, "False") == 0)
    fortran = false;
  else
    return makeError("%s: malformed .npy header (bad 'fortran_order')",
                     what.c_str());

  if (!findKey(header, "shape", rest) || rest.empty() || rest[0] != '(')
    return makeError("%s: malformed .npy header (no 'shape')", what.c_str());
  end = rest.find(')');
  if (end == std::string::npos)
    return makeError("%s: malformed .npy header (bad 'shape')", what.c_str());
  std::string dims = rest.substr(1, end - 1);
  shape.clear();
  std::stringstream ss(dims);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t");
    if (b == std::string::npos)
      continue;
    size_t e = item.find_last_not_of(" \tL");
    std::string num = item.substr(b, e - b + 1);
    char *endp = nullptr;
    errno = 0;
    long long v = std::strtoll(num.c_str(), &endp, 10);
    if (errno || endp == num.c_str() || *endp != '\0' || v < 0)
      return makeError("%s: malformed .npy header (bad dimension '%s')",
                       what.c_str(), num.c_str());
    shape.push_back(v);
  }
  // Readers multiply sizes in any order (a sample's elements, then the
  // whole's): the product of those that are not 0 must fit.
  int64_t elems = 1;
  for (int64_t d : shape)
    if (d != 0 && __builtin_mul_overflow(elems, d, &elems))
      return makeError("%s: shape %s is too large", what.c_str(),
                       shapeToString(shape).c_str());
  return Status::ok();
}

} // namespace

/// Where the header of the .npy file starting with `bytes` (its first 12
/// bytes suffice) lies: checks the magic bytes and the format version.
static Status headerBounds(std::string_view bytes, const std::string &what,
                           size_t &headerStart, size_t &headerLen) {
  if (bytes.size() < 10 ||
      bytes.compare(0, 6, std::string_view(kMagic, 6)) != 0)
    return makeError("%s: not a .npy file (bad magic bytes)", what.c_str());
  unsigned major = static_cast<uint8_t>(bytes[6]);
  headerLen = 0;
  if (major == 1) {
    headerLen = static_cast<uint8_t>(bytes[8]) |
                (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return makeError("%s: truncated .npy header", what.c_str());
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i]))
                   << (8 * i);
    headerStart = 12;
  } else {
    return makeError("%s: unsupported .npy format version %u", what.c_str(),
                     major);
  }
  return Status::ok();
}

namespace {

/// The `.npy` descriptors of the element types (little-endian).
constexpr std::pair<const char *, ElemType> kDescrs[] = {
    {"<f4", ElemType::F32}, {"<f8", ElemType::F64}, {"<f2", ElemType::F16},
    {"<i8", ElemType::I64}, {"<i4", ElemType::I32}, {"<i2", ElemType::I16},
    {"|i1", ElemType::I8},  {"<u8", ElemType::U64}, {"<u4", ElemType::U32},
    {"<u2", ElemType::U16}, {"|u1", ElemType::U8},  {"|b1", ElemType::Bool}};

} // namespace

std::optional<ElemType> npyElemType(const std::string &descr) {
  for (const auto &[d, type] : kDescrs)
    if (descr == d)
      return type;
  return std::nullopt;
}

const char *npyDescr(ElemType type) {
  for (const auto &[d, t] : kDescrs)
    if (t == type)
      return d;
  return "?";
}

Status parseNpyHeader(std::string_view bytes, const std::string &what,
                      NpyHeader &out) {
  size_t headerStart = 0, headerLen = 0;
  LOOM_RETURN_IF_ERROR(headerBounds(bytes, what, headerStart, headerLen));
  if (bytes.size() < headerStart + headerLen)
    return makeError("%s: truncated .npy header", what.c_str());
  bool fortran = false;
  LOOM_RETURN_IF_ERROR(
      parseHeader(std::string(bytes.substr(headerStart, headerLen)), what,
                  out.descr, fortran, out.shape));
  if (fortran)
    return makeError("%s: Fortran-order arrays are not supported; save a "
                     "C-order array (numpy.ascontiguousarray)",
                     what.c_str());
  out.dataOffset = headerStart + headerLen;
  return Status::ok();
}

StatusOr<HostTensor> parseNpy(const std::string &bytes, const std::string &what,
                              const NpyReadOptions &options) {
  NpyHeader header;
  LOOM_RETURN_IF_ERROR(parseNpyHeader(bytes, what, header));
  const std::string &descr = header.descr;
  HostTensor t;
  t.shape = header.shape;
  std::optional<ElemType> type = npyElemType(descr);
  if (!type)
    return makeError("%s: unsupported dtype '%s' (expected a float, integer "
                     "or bool array: <f4, <f8, <f2, <i8, <i4, |b1, |u1, ...)",
                     what.c_str(), descr.c_str());
  t.type = *type;

  size_t dataStart = header.dataOffset;
  // The header's shape is untrusted: its byte count must not overflow.
  int64_t need64 = elemSize(t.type);
  for (int64_t d : t.shape)
    if (__builtin_mul_overflow(need64, d, &need64))
      return makeError("%s: shape %s is too large", what.c_str(),
                       shapeToString(t.shape).c_str());
  size_t need = static_cast<size_t>(need64);
  if (bytes.size() - dataStart < need)
    return makeError("%s: truncated data (%zu bytes for shape %s %s, expected "
                     "%zu)",
                     what.c_str(), bytes.size() - dataStart,
                     shapeToString(t.shape).c_str(), elemTypeName(t.type),
                     need);
  t.bytes.assign(bytes.begin() + dataStart, bytes.begin() + dataStart + need);

  if (options.convertF64ToF32 && t.type == ElemType::F64) {
    HostTensor f(ElemType::F32, t.shape);
    const double *src = t.data<double>();
    float *dst = f.data<float>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      dst[i] = static_cast<float>(src[i]);
    return f;
  }
  return t;
}

StatusOr<HostTensor> readNpy(const std::string &path,
                             const NpyReadOptions &options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError("cannot open '%s': %s", path.c_str(),
                     std::strerror(errno));
  // Headers first, then only the bytes the header promises (a stream such
  // as /dev/zero is refused at its first bytes, not read until memory runs
  // out); parseNpy checks the whole again.
  std::string bytes;
  auto readMore = [&](size_t n) {
    size_t old = bytes.size();
    bytes.resize(old + n);
    in.read(&bytes[old], static_cast<std::streamsize>(n));
    bytes.resize(old + static_cast<size_t>(in.gcount()));
  };
  readMore(12);
  size_t headerStart = 0, headerLen = 0;
  LOOM_RETURN_IF_ERROR(headerBounds(bytes, path, headerStart, headerLen));
  if (bytes.size() < headerStart + headerLen)
    readMore(headerStart + headerLen - bytes.size());
  if (bytes.size() < headerStart + headerLen)
    return makeError("%s: truncated .npy header", path.c_str());
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  LOOM_RETURN_IF_ERROR(parseHeader(bytes.substr(headerStart, headerLen), path,
                                   descr, fortran, shape));
  // The body: the bytes the shape needs (none for a dtype parseNpy then
  // refuses); a regular file shorter than that is read whole and refused
  // as truncated by parseNpy.
  std::optional<ElemType> type = npyElemType(descr);
  int64_t body = type ? elemSize(*type) : 0;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(body, d, &body))
      return makeError("%s: shape %s is too large", path.c_str(),
                       shapeToString(shape).c_str());
  std::error_code ec;
  uintmax_t fileBytes = std::filesystem::file_size(path, ec);
  if (!ec && fileBytes < bytes.size() + static_cast<uintmax_t>(body))
    body = static_cast<int64_t>(fileBytes - bytes.size());
  readMore(static_cast<size_t>(body));
  if (in.bad())
    return makeError("cannot read '%s'", path.c_str());
  return parseNpy(bytes, path, options);
}

Status writeNpy(const std::string &path, const HostTensor &tensor) {
  if (tensor.type == ElemType::BF16)
    return makeError("cannot write '%s': .npy has no bfloat16 dtype",
                     path.c_str());
  const char *descr = npyDescr(tensor.type);
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    shape += std::to_string(tensor.shape[i]) + ", ";
  if (tensor.shape.size() > 1)
    shape.resize(shape.size() - 2);
  else if (tensor.shape.size() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return makeError("cannot create '%s': %s", path.c_str(),
                     std::strerror(errno));
  out.write(kMagic, 6);
  char version[4] = {1, 0, static_cast<char>(header.size() & 0xff),
                     static_cast<char>(header.size() >> 8)};
  out.write(version, 4);
  out.write(header.data(), header.size());
  out.write(reinterpret_cast<const char *>(tensor.bytes.data()),
            tensor.bytes.size());
  out.close();
  if (!out)
    return makeError("cannot write '%s'", path.c_str());
  return Status::ok();
}

} // namespace loom::runtime
