//===- Npy.h - Read and write NumPy .npy files ------------------*- C++ -*-===//
//
// Versions 1.0, 2.0 and 3.0 of the format, C order, little-endian `<f4`,
// `<f8`, `<i4` and `<i8`; other dtypes are rejected.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DATA_NPY_H
#define LOOM_RUNTIME_DATA_NPY_H

#include "runtime/support/HostTensor.h"
#include "runtime/support/Status.h"

#include <optional>
#include <string>
#include <string_view>

namespace loom::runtime {

struct NpyReadOptions {
  /// Convert `<f8` arrays to F32 while reading.
  bool convertF64ToF32 = false;
};

/// The header of an .npy file: its dtype string (`<f4`, `|u1`, ...), its
/// shape, and where its data starts.
struct NpyHeader {
  std::string descr;
  std::vector<int64_t> shape;
  size_t dataOffset = 0;
};

/// Parses the header at the start of `bytes` (the file's first bytes; the
/// header must lie within them). Refuses a bad magic, an unknown format
/// version, a malformed dict and Fortran order; `what` names the file.
Status parseNpyHeader(std::string_view bytes, const std::string &what,
                      NpyHeader &out);

/// The element type of a `.npy` descriptor ("<f4", "|b1", ...), if any; and
/// the descriptor of a type ("?" for bfloat16, which `.npy` lacks).
std::optional<ElemType> npyElemType(const std::string &descr);
const char *npyDescr(ElemType type);

/// Reads `path`. Errors name the file and say what is wrong (missing, not an
/// .npy file, Fortran order, unsupported dtype, truncated).
StatusOr<HostTensor> readNpy(const std::string &path,
                             const NpyReadOptions &options = {});

/// Parses an in-memory .npy image; `what` names it in errors.
StatusOr<HostTensor> parseNpy(const std::string &bytes, const std::string &what,
                              const NpyReadOptions &options = {});

/// Writes `tensor` as a version 1.0 .npy file (64-byte aligned header).
Status writeNpy(const std::string &path, const HostTensor &tensor);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DATA_NPY_H
