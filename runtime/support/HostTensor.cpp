//===- HostTensor.cpp - A dense host array with its element type -*- C++ -*-===//

#include "runtime/support/HostTensor.h"

#include <cmath>

namespace loom::runtime {

int64_t elemSize(ElemType type) {
  switch (type) {
  case ElemType::Bool:
  case ElemType::I8:
  case ElemType::U8:
    return 1;
  case ElemType::I16:
  case ElemType::U16:
  case ElemType::F16:
  case ElemType::BF16:
    return 2;
  case ElemType::F32:
  case ElemType::I32:
  case ElemType::U32:
    return 4;
  case ElemType::F64:
  case ElemType::I64:
  case ElemType::U64:
    return 8;
  }
  return 0;
}

const char *elemTypeName(ElemType type) {
  switch (type) {
  case ElemType::F32:
    return "float32";
  case ElemType::F64:
    return "float64";
  case ElemType::I32:
    return "int32";
  case ElemType::I64:
    return "int64";
  case ElemType::Bool:
    return "bool";
  case ElemType::I8:
    return "int8";
  case ElemType::U8:
    return "uint8";
  case ElemType::I16:
    return "int16";
  case ElemType::U16:
    return "uint16";
  case ElemType::U32:
    return "uint32";
  case ElemType::U64:
    return "uint64";
  case ElemType::F16:
    return "float16";
  case ElemType::BF16:
    return "bfloat16";
  }
  return "?";
}

bool isFloatType(ElemType type) {
  return type == ElemType::F32 || type == ElemType::F64 ||
         type == ElemType::F16 || type == ElemType::BF16;
}

uint16_t floatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) // NaN: quiet, with its sign
    return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  if (abs >= 0x477ff000u) // rounds to 65520 or more: infinity
    return sign | 0x7c00u;
  if (abs >= 0x38800000u) { // normal in binary16
    uint32_t rounded = abs + 0x0fffu + ((abs >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  // Subnormal or zero: the value in units of 2^-24, rounded to even.
  float scaled;
  std::memcpy(&scaled, &abs, sizeof(scaled));
  return sign | static_cast<uint16_t>(std::nearbyint(scaled * 16777216.0f));
}

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    u |= sign;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  }
  uint32_t u = exp == 0x1f ? sign | 0x7f800000u | (mant << 13)
                           : sign | ((exp + 112) << 23) | (mant << 13);
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

namespace {

/// Element `i` of `t` as a double (floats) or an int64 (the others).
double floatAt(const HostTensor &t, int64_t i) {
  switch (t.type) {
  case ElemType::F32:
    return t.data<float>()[i];
  case ElemType::F64:
    return t.data<double>()[i];
  case ElemType::F16:
    return halfToFloat(t.data<uint16_t>()[i]);
  case ElemType::BF16:
    return bf16ToFloat(t.data<uint16_t>()[i]);
  default:
    return 0;
  }
}

int64_t intAt(const HostTensor &t, int64_t i) {
  switch (t.type) {
  case ElemType::Bool:
    return t.data<uint8_t>()[i] != 0;
  case ElemType::I8:
    return t.data<int8_t>()[i];
  case ElemType::U8:
    return t.data<uint8_t>()[i];
  case ElemType::I16:
    return t.data<int16_t>()[i];
  case ElemType::U16:
    return t.data<uint16_t>()[i];
  case ElemType::I32:
    return t.data<int32_t>()[i];
  case ElemType::U32:
    return t.data<uint32_t>()[i];
  case ElemType::I64:
    return t.data<int64_t>()[i];
  case ElemType::U64:
    return static_cast<int64_t>(t.data<uint64_t>()[i]);
  default:
    return 0;
  }
}

template <typename T> void put(HostTensor &t, int64_t i, T v) {
  std::memcpy(t.bytes.data() + i * sizeof(T), &v, sizeof(T));
}

} // namespace

HostTensor convertElements(const HostTensor &value, ElemType type) {
  if (value.type == type)
    return value;
  HostTensor out(type, value.shape);
  bool fromFloat = isFloatType(value.type);
  for (int64_t i = 0, n = value.numel(); i < n; ++i) {
    double f = fromFloat ? floatAt(value, i) : 0;
    int64_t k = fromFloat ? 0 : intAt(value, i);
    // An integer for the integer types: a float truncated toward zero
    // (NaN and out-of-range values become 0, not undefined behaviour).
    auto asInt = [&]() -> int64_t {
      if (!fromFloat)
        return k;
      if (!(std::fabs(f) < 9.2e18))
        return 0;
      return static_cast<int64_t>(f);
    };
    auto asFloat = [&]() { return fromFloat ? f : static_cast<double>(k); };
    switch (type) {
    case ElemType::F32:
      put<float>(out, i, static_cast<float>(asFloat()));
      break;
    case ElemType::F64:
      put<double>(out, i, asFloat());
      break;
    case ElemType::F16:
      put<uint16_t>(out, i, floatToHalf(static_cast<float>(asFloat())));
      break;
    case ElemType::BF16:
      put<uint16_t>(out, i, floatToBf16(static_cast<float>(asFloat())));
      break;
    case ElemType::Bool:
      put<uint8_t>(out, i, fromFloat ? f != 0 : k != 0);
      break;
    case ElemType::I8:
      put<int8_t>(out, i, static_cast<int8_t>(asInt()));
      break;
    case ElemType::U8:
      put<uint8_t>(out, i, static_cast<uint8_t>(asInt()));
      break;
    case ElemType::I16:
      put<int16_t>(out, i, static_cast<int16_t>(asInt()));
      break;
    case ElemType::U16:
      put<uint16_t>(out, i, static_cast<uint16_t>(asInt()));
      break;
    case ElemType::I32:
      put<int32_t>(out, i, static_cast<int32_t>(asInt()));
      break;
    case ElemType::U32:
      put<uint32_t>(out, i, static_cast<uint32_t>(asInt()));
      break;
    case ElemType::I64:
      put<int64_t>(out, i, asInt());
      break;
    case ElemType::U64:
      put<uint64_t>(out, i, static_cast<uint64_t>(asInt()));
      break;
    }
  }
  return out;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeToString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

HostTensor HostTensor::fromF32(std::vector<int64_t> shape,
                               const std::vector<float> &values) {
  HostTensor t(ElemType::F32, std::move(shape));
  size_t n = std::min(t.bytes.size(), values.size() * sizeof(float));
  if (n > 0) // an empty tensor's or vector's data() may be null
    std::memcpy(t.bytes.data(), values.data(), n);
  return t;
}

HostTensor HostTensor::fromI64(std::vector<int64_t> shape,
                               const std::vector<int64_t> &values) {
  HostTensor t(ElemType::I64, std::move(shape));
  size_t n = std::min(t.bytes.size(), values.size() * sizeof(int64_t));
  if (n > 0) // an empty tensor's or vector's data() may be null
    std::memcpy(t.bytes.data(), values.data(), n);
  return t;
}

std::vector<float> HostTensor::toF32() const {
  HostTensor f = convertElements(*this, ElemType::F32);
  std::vector<float> out(f.numel());
  if (!out.empty())
    std::memcpy(out.data(), f.bytes.data(), out.size() * sizeof(float));
  return out;
}

} // namespace loom::runtime
