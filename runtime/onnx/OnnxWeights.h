//===- OnnxWeights.h - Initializers of an ONNX model ---------------*- C++ -*-===//
//
// Reads initial weights from, and writes trained weights into, ONNX models
// with the ONNX protobuf classes only (no checker, no shape inference), so the
// runtime stays independent of the compiler's frontend.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ONNX_ONNXWEIGHTS_H
#define LOOM_RUNTIME_ONNX_ONNXWEIGHTS_H

#include "runtime/support/HostTensor.h"
#include "runtime/support/Status.h"

#include <map>
#include <memory>
#include <string>

namespace loom::runtime {

class OnnxWeights {
public:
  ~OnnxWeights();

  /// Parses the model at `modelPath` (external data is read lazily, relative
  /// to the model's folder).
  static StatusOr<std::unique_ptr<OnnxWeights>>
  load(const std::string &modelPath);

  /// Initializer `name` as `type`: F32 from FLOAT or DOUBLE, I64 from INT64
  /// or INT32 (float_data / double_data / int64_data / int32_data, raw_data or
  /// external data).
  StatusOr<HostTensor> get(const std::string &name, ElemType type) const;

  const std::string &path() const { return modelPath; }

private:
  struct Impl;
  explicit OnnxWeights(std::string path);
  std::string modelPath;
  std::unique_ptr<Impl> impl;
};

/// Writes a copy of the model at `modelPath` to `outPath` in which the
/// initializer of each name in `values` holds that value (as raw_data) and
/// every external-data initializer is inlined. A value named by the output
/// of an `Identity` node (a parameter the exporter deduplicated) replaces
/// that node as an initializer of its own.
Status exportOnnxWithWeights(const std::string &modelPath,
                             const std::map<std::string, HostTensor> &values,
                             const std::string &outPath);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_ONNX_ONNXWEIGHTS_H
