//===- SampleArray.cpp - The samples a data binding reads -------*- C++ -*-===//

#include "runtime/data/SampleArray.h"

#include "runtime/PlanFormat.h"
#include "runtime/data/Npy.h"

#include <cmath>
#include <cstring>

namespace loom::runtime {

int64_t dataTypeSize(DataType type) {
  switch (type) {
  case DataType::U8:
  case DataType::I8:
    return 1;
  case DataType::U16:
  case DataType::I16:
  case DataType::F16:
    return 2;
  case DataType::U32:
  case DataType::I32:
  case DataType::F32:
    return 4;
  case DataType::U64:
  case DataType::I64:
  case DataType::F64:
    return 8;
  }
  return 1;
}

const char *dataTypeName(DataType type) {
  switch (type) {
  case DataType::U8:
    return "uint8";
  case DataType::U16:
    return "uint16";
  case DataType::U32:
    return "uint32";
  case DataType::U64:
    return "uint64";
  case DataType::I8:
    return "int8";
  case DataType::I16:
    return "int16";
  case DataType::I32:
    return "int32";
  case DataType::I64:
    return "int64";
  case DataType::F16:
    return "float16";
  case DataType::F32:
    return "float32";
  case DataType::F64:
    return "float64";
  }
  return "?";
}

bool isFloat(DataType type) {
  return type == DataType::F16 || type == DataType::F32 ||
         type == DataType::F64;
}

std::optional<DataType> npyDataType(const std::string &descr) {
  // One-byte types carry '|' (NumPy's "not applicable"); '<' is
  // little-endian and '=' native, which is little-endian on every machine
  // Loom runs on.
  if (descr.size() != 3 ||
      (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    return std::nullopt;
  static const struct {
    const char *code;
    DataType type;
  } kTypes[] = {
      {"u1", DataType::U8},  {"u2", DataType::U16},
      {"u4", DataType::U32}, {"u8", DataType::U64},
      {"i1", DataType::I8},  {"i2", DataType::I16},
      {"i4", DataType::I32}, {"i8", DataType::I64},
      {"f2", DataType::F16}, {"f4", DataType::F32},
      {"f8", DataType::F64}, {"b1", DataType::U8}}; // bools: one byte, 0 or 1
  for (const auto &t : kTypes)
    if (descr.compare(1, 2, t.code) == 0)
      return t.type;
  return std::nullopt;
}

std::string SampleArray::where(int64_t i, int64_t e) const {
  if (firstToken >= 0)
    return "position " + std::to_string(firstToken + i * strideElems + e);
  return "sample " + std::to_string(i) + ", element " + std::to_string(e);
}

SampleArray SampleArray::fromTensor(HostTensor tensor,
                                    const std::string &name) {
  auto held = std::make_shared<HostTensor>(std::move(tensor));
  SampleArray a;
  a.name = name;
  switch (held->type) {
  case ElemType::F32:
    a.type = DataType::F32;
    break;
  case ElemType::F64:
    a.type = DataType::F64;
    break;
  case ElemType::F16:
    a.type = DataType::F16;
    break;
  case ElemType::I8:
    a.type = DataType::I8;
    break;
  case ElemType::I16:
    a.type = DataType::I16;
    break;
  case ElemType::I32:
    a.type = DataType::I32;
    break;
  case ElemType::I64:
    a.type = DataType::I64;
    break;
  case ElemType::Bool: // one byte, 0 or 1
  case ElemType::U8:
    a.type = DataType::U8;
    break;
  case ElemType::U16:
    a.type = DataType::U16;
    break;
  case ElemType::U32:
    a.type = DataType::U32;
    break;
  case ElemType::U64:
    a.type = DataType::U64;
    break;
  case ElemType::BF16: // not an .npy type; widened
    *held = convertElements(*held, ElemType::F32);
    a.type = DataType::F32;
    break;
  }
  a.shape = held->shape;
  a.base = held->bytes.data();
  a.strideElems = a.perSample();
  a.owner = held;
  return a;
}

StatusOr<SampleArray> mapNpy(const std::string &path) {
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file,
                        MappedFile::open(path));
  std::string_view bytes(reinterpret_cast<const char *>(file->data()),
                         file->size());
  NpyHeader header;
  LOOM_RETURN_IF_ERROR(parseNpyHeader(bytes, path, header));
  std::optional<DataType> type = npyDataType(header.descr);
  if (!type)
    return makeError("%s: unsupported dtype '%s' (data may be uint8, uint16, "
                     "uint32, uint64, int8, int16, int32, int64, float16, "
                     "float32 or float64, little-endian)",
                     path.c_str(), header.descr.c_str());
  SampleArray a;
  a.name = path;
  a.type = *type;
  a.shape = header.shape;
  // The header's shape is untrusted: its byte count must not overflow.
  int64_t need = dataTypeSize(a.type);
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(need, d, &need))
      return makeError("%s: shape %s is too large", path.c_str(),
                       shapeToString(a.shape).c_str());
  uint64_t have = file->size() - header.dataOffset;
  if (have < static_cast<uint64_t>(need))
    return makeError("%s: truncated data (%llu bytes for shape %s %s, "
                     "expected %lld)",
                     path.c_str(), (unsigned long long)have,
                     shapeToString(a.shape).c_str(), dataTypeName(a.type),
                     (long long)need);
  a.base = file->data() + header.dataOffset;
  a.strideElems = a.perSample();
  a.mapped = file.get();
  a.owner = std::move(file);
  return a;
}

namespace {

/// An IEEE half's bits, read as such.
struct Half {
  uint16_t bits;
};

float halfToFloat(uint16_t h) {
  float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  if (exp == 0) // zero and subnormals: mant * 2^-24, exact in a float
    return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31)
    return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

template <typename T> T load(const uint8_t *p, int64_t k) {
  T v;
  std::memcpy(&v, p + k * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <> Half load<Half>(const uint8_t *p, int64_t k) {
  return Half{load<uint16_t>(p, k)};
}

template <typename T> float toFloat(T v) { return static_cast<float>(v); }
template <> float toFloat<Half>(Half v) { return halfToFloat(v.bits); }

/// Calls `f(T{})` with the C++ type of `type`.
template <typename F> auto visitType(DataType type, F &&f) {
  switch (type) {
  case DataType::U8:
    return f(uint8_t{});
  case DataType::U16:
    return f(uint16_t{});
  case DataType::U32:
    return f(uint32_t{});
  case DataType::U64:
    return f(uint64_t{});
  case DataType::I8:
    return f(int8_t{});
  case DataType::I16:
    return f(int16_t{});
  case DataType::I32:
    return f(int32_t{});
  case DataType::I64:
    return f(int64_t{});
  case DataType::F16:
    return f(Half{});
  case DataType::F32:
    return f(float{});
  case DataType::F64:
    return f(double{});
  }
  return f(float{});
}

/// The int64 value of `v`, or none when it has none (a float that is not a
/// whole number, NaN, infinite or beyond int64; a uint64 above 2^63 - 1).
template <typename T> std::optional<int64_t> toInt64(T v) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (v > static_cast<uint64_t>(INT64_MAX))
      return std::nullopt;
    return static_cast<int64_t>(v);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<int64_t>(v);
  } else {
    double d = toFloat(v);
    // [-2^63, 2^63): both bounds are exact doubles.
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) ||
        d != std::trunc(d))
      return std::nullopt;
    return static_cast<int64_t>(d);
  }
}

template <typename T> std::string valueText(T v) {
  if constexpr (std::is_same_v<T, uint64_t>)
    return std::to_string(v);
  else if constexpr (std::is_integral_v<T>)
    return std::to_string(static_cast<int64_t>(v));
  else {
    char text[32];
    std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(toFloat(v)));
    return text;
  }
}

} // namespace

Status copySample(const SampleArray &array, int64_t i, plan::DType dtype,
                  uint8_t *dst, int64_t limit, const char *limitWhat) {
  const uint8_t *src = array.sample(i);
  int64_t n = array.perSample();
  if (n == 0) // a sample of no elements (shape (N, 0)): nothing to copy
    return Status::ok();
  if (array.mapped)
    array.mapped->noteRead(static_cast<uint64_t>(n * dataTypeSize(array.type)));
  if (dtype == plan::F32) {
    if (array.type == DataType::F32) {
      std::memcpy(dst, src, n * sizeof(float));
      return Status::ok();
    }
    float *to = reinterpret_cast<float *>(dst);
    visitType(array.type, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t k = 0; k < n; ++k)
        to[k] = toFloat(load<T>(src, k));
    });
    return Status::ok();
  }
  if (dtype != plan::I64)
    return makeError("%s: a data buffer of type %s cannot be fed; inputs "
                     "and targets are f32 or i64",
                     array.name.c_str(), dtypeName(dtype));
  int64_t *to = reinterpret_cast<int64_t *>(dst);
  return visitType(array.type, [&](auto tag) -> Status {
    using T = decltype(tag);
    for (int64_t k = 0; k < n; ++k) {
      T raw = load<T>(src, k);
      std::optional<int64_t> v = toInt64(raw);
      if (!v)
        return makeError("%s: %s at %s is not a whole number that fits "
                         "int64; the plan's buffer holds integers",
                         array.name.c_str(), valueText(raw).c_str(),
                         array.where(i, k).c_str());
      if (limit > 0 && (*v < 0 || *v >= limit))
        return makeError("%s: %s %lld at %s is outside [0, %lld)%s",
                         array.name.c_str(), limitWhat, (long long)*v,
                         array.where(i, k).c_str(), (long long)limit,
                         array.firstToken >= 0 ? ", the model's vocabulary"
                                               : "");
      to[k] = *v;
    }
    return Status::ok();
  });
}

} // namespace loom::runtime
