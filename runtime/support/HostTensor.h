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

enum class ElemType { F32, F64, I32, I64 };

/// Bytes of one element of `type`.
int64_t elemSize(ElemType type);
/// "float32", "float64", "int32", "int64".
const char *elemTypeName(ElemType type);
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

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_HOSTTENSOR_H
