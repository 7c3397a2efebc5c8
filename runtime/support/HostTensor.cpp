//===- HostTensor.cpp - A dense host array with its element type -*- C++ -*-===//

#include "runtime/support/HostTensor.h"

namespace loom::runtime {

int64_t elemSize(ElemType type) {
  switch (type) {
  case ElemType::F32:
  case ElemType::I32:
    return 4;
  case ElemType::F64:
  case ElemType::I64:
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
  }
  return "?";
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
  int64_t n = numel();
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
    case ElemType::F32:
      out[i] = data<float>()[i];
      break;
    case ElemType::F64:
      out[i] = static_cast<float>(data<double>()[i]);
      break;
    case ElemType::I32:
      out[i] = static_cast<float>(data<int32_t>()[i]);
      break;
    case ElemType::I64:
      out[i] = static_cast<float>(data<int64_t>()[i]);
      break;
    }
  }
  return out;
}

} // namespace loom::runtime
