//===- SampleArray.h - The samples a data binding reads ---------*- C++ -*-===//
//
// A `SampleArray` is N samples of one shape, in one element type, read in
// place: from a memory-mapped `.npy` file (`mapNpy`), from windows of a
// token stream (`TokenStream`), or from a tensor held in memory (the
// in-process API). Samples need not be contiguous: a token stream's
// windows overlap by one token, which `strideElems` expresses.
//
// `copySample` converts a sample to a plan buffer's type as PyTorch's
// `tensor.to(dtype)` would, and refuses what that would corrupt: a value
// that does not fit an int64 (uint64 above 2^63 - 1, a float that is not a
// whole number, NaN or infinite), and an id outside its range (a class id
// of a cross-entropy target, a token outside the vocabulary), naming where
// in the file it sits.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DATA_SAMPLEARRAY_H
#define LOOM_RUNTIME_DATA_SAMPLEARRAY_H

#include "runtime/data/MappedFile.h"
#include "runtime/plan.pb.h"
#include "runtime/support/HostTensor.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::runtime {

/// The element types data files may hold.
enum class DataType { U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64 };

/// Bytes of one element.
int64_t dataTypeSize(DataType type);
/// NumPy's name: "uint16", "float32", ...
const char *dataTypeName(DataType type);
bool isFloat(DataType type);
/// The type of an .npy `descr` (`<u2`, `|u1`, `<f8`, ...); none for others.
std::optional<DataType> npyDataType(const std::string &descr);

struct SampleArray {
  /// The file (or "the array 'x'"), in errors.
  std::string name;
  DataType type = DataType::F32;
  /// [N, sample dims...].
  std::vector<int64_t> shape;
  /// The first element of sample 0, and the elements from one sample's
  /// first element to the next one's.
  const uint8_t *base = nullptr;
  int64_t strideElems = 0;
  /// Token streams: the index in the stream of sample 0's first token, so
  /// errors give a token's position in the file; -1 for arrays, whose
  /// errors give the sample and the element.
  int64_t firstToken = -1;
  /// What keeps `base` valid (the mapping or the tensor).
  std::shared_ptr<void> owner;
  /// The mapping, told of reads (none for a tensor in memory).
  MappedFile *mapped = nullptr;

  int64_t samples() const { return shape.empty() ? 0 : shape[0]; }
  int64_t perSample() const { return product(shape, 1, shape.size()); }
  const uint8_t *sample(int64_t i) const {
    return base + i * strideElems * dataTypeSize(type);
  }
  /// Where element `e` of sample `i` lies: "token 1234 of tokens.bin" or
  /// "sample 5, element 3 of x.npy".
  std::string where(int64_t i, int64_t e) const;

  /// A tensor's samples (dim 0), held by the array.
  static SampleArray fromTensor(HostTensor tensor, const std::string &name);
};

/// Maps the .npy file `path` (any version, C order, little-endian, a type of
/// `DataType`). Refuses a file shorter than its header says, naming it.
StatusOr<SampleArray> mapNpy(const std::string &path);

/// Copies sample `i` of `array` into `dst`, a plan buffer's sample of
/// `dtype` (F32 or I64), converting. With `limit` > 0 every value must lie in
/// [0, limit) (`limitWhat` says what the value is: "class id", "token").
Status copySample(const SampleArray &array, int64_t i, plan::DType dtype,
                  uint8_t *dst, int64_t limit = 0,
                  const char *limitWhat = "class id");

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DATA_SAMPLEARRAY_H
