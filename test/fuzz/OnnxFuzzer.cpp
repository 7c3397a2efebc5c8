//===- OnnxFuzzer.cpp - Fuzz target: the ONNX importer --------------------===//
//
// Bytes as an ONNX model, binary protobuf or (built as the text target,
// LOOM_FUZZ_ONNX_TEXT) ONNX text syntax, imported as loomc imports it:
// checker, shape inference, folding and conversion to the loom dialect.
// Diagnostics are dropped; an exception escaping the importer, a crash or a
// sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#ifdef LOOM_FUZZ_ONNX_TEXT
static const char *kSuffix = ".onnxtext";
#else
static const char *kSuffix = ".onnx";
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The importer reads a path (external data lives beside the model).
  static const std::string path = "/tmp/loom-fuzz-" +
                                  std::to_string(getpid()) + kSuffix;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data), size);
  }
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler drop(&ctx, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  (void)mlir::loom::importOnnxFile(&ctx, path, {});
  return 0;
}
