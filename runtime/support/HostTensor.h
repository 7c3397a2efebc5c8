//===- HostTensor.h - A dense host array with its element type ----*- C++ -*-===//
//
// The currency between data files, weights and the in-process API: a C-order
// array of one of the element types `.npy` files and plans use.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SUPPORT_HOSTTENSOR_H
#define LOOM_RUNTIME_SUPPORT_HOSTTENSOR_H

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace loom::runtime {

/// The element types of `.npy` files and plan buffers. Plans compute in F32
/// and I64 (BF16 inside the program); the others are graph inputs' and
/// outputs' types, converted at the boundary (`convertElements`).
enum class ElemType {
  F32,
  F64,
  I32,
  I64,
  Bool,
  I8,
  U8,
  I16,
  U16,
  U32,
  U64,
  F16,
  BF16
};

/// Bytes of one element of `type`.
int64_t elemSize(ElemType type);
/// "float32", "float64", "int32", "int64", "bool", "uint8", "float16", ...
const char *elemTypeName(ElemType type);
/// Whether `type` holds floating-point values.
bool isFloatType(ElemType type);
/// Product of `shape` (1 for a scalar).
int64_t numElements(const std::vector<int64_t> &shape);
/// Product of `shape[from, to)` (1 for an empty range).
inline int64_t product(const std::vector<int64_t> &shape, size_t from,
                       size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i)
    p *= shape[i];
  return p;
}
/// "[2, 3]" style text for messages.
std::string shapeToString(const std::vector<int64_t> &shape);

/// A dense C-order host array.
struct HostTensor {
  ElemType type = ElemType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes; // numel * elemSize(type) bytes

  HostTensor() = default;
  HostTensor(ElemType type, std::vector<int64_t> shape)
      : type(type), shape(std::move(shape)),
        bytes(numElements(this->shape) * elemSize(type)) {}

  /// Builds an F32 tensor from `values` (its size must match `shape`).
  static HostTensor fromF32(std::vector<int64_t> shape,
                            const std::vector<float> &values);
  /// Builds an I64 tensor from `values` (its size must match `shape`).
  static HostTensor fromI64(std::vector<int64_t> shape,
                            const std::vector<int64_t> &values);

  int64_t numel() const { return numElements(shape); }
  template <typename T> T *data() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(bytes.data());
  }
  /// The values as floats (any element type, converted).
  std::vector<float> toF32() const;
};

/// `value` with its elements converted to `type`: floats round to nearest
/// even (f16 and bf16 included), integers convert exactly where they fit and
/// wrap as C++ casts do where not, floats truncate toward zero to integers,
/// and anything nonzero becomes `true`.
HostTensor convertElements(const HostTensor &value, ElemType type);

/// The binary16 nearest to `f` (ties to even), as bits; and back (exact).
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);

/// The bf16 nearest to `f` (ties to even), as bits; NaN stays a quiet NaN
/// with its sign, infinities stay infinite.
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// The f32 value of bf16 bits (exact).
inline float bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_HOSTTENSOR_H
