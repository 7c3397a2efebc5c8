//===- OnnxExternalData.cpp - External initializer data ---------*- C++ -*-===//
//
// `onnx.save(..., save_as_external_data=True)` moves initializer bytes into
// files next to the model (`data_location: EXTERNAL` with `location`,
// `offset` and `length` entries, the location relative to the model's
// folder). ONNX's checker looks for those files relative to the working
// directory and its shape inference cannot read them, so the importer
// resolves them before either runs:
//
// - integer and boolean tensors (shape operands, masks: values the importer
//   folds) are read into `raw_data`; their data must be there;
// - float32 tensors (mostly parameters, whose values the compiler does not
//   need) are not read: their file is checked and they get a stub value for
//   the checker; where their bytes live is kept for the few float tensors
//   the importer does read (constants, BatchNormalization's running
//   statistics, copies of parameters: frontend/OnnxParameters.cpp). A missing
//   file is an error unless the caller plans without stored weights.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

/// Bytes per element of the element types whose external data the importer
/// reads or checks; 0 for others (their length is not checked).
static int64_t elementBytes(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::DOUBLE:
    return 8;
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
    return 1;
  default:
    return 0;
  }
}

/// Parses one of the `offset` / `length` entries.
static FailureOr<int64_t> parseSize(Location loc, const onnx::TensorProto &t,
                                    StringRef key, StringRef value) {
  int64_t v;
  if (value.trim().getAsInteger(10, v) || v < 0)
    return emitError(loc) << "initializer '" << t.name()
                          << "' has a bad external data " << key << " '"
                          << value << "'";
  return v;
}

FailureOr<llvm::StringMap<ExternalTensor>>
onnx_import::resolveExternalData(Location loc, StringRef modelPath,
                                 onnx::ModelProto &model,
                                 bool allowMissingWeights) {
  llvm::StringMap<ExternalTensor> floats;
  SmallString<256> modelDir(modelPath);
  llvm::sys::path::remove_filename(modelDir);
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    ExternalTensor ref;
    std::string location;
    for (const auto &entry : t.external_data()) {
      if (entry.key() == "location") {
        location = entry.value();
      } else if (entry.key() == "offset") {
        auto v = parseSize(loc, t, "offset", entry.value());
        if (failed(v))
          return failure();
        ref.offset = *v;
      } else if (entry.key() == "length") {
        auto v = parseSize(loc, t, "length", entry.value());
        if (failed(v))
          return failure();
        ref.length = *v;
      }
    }
    if (location.empty())
      return emitError(loc) << "initializer '" << t.name()
                            << "' stores external data without a location";
    SmallString<256> file;
    if (llvm::sys::path::is_absolute(location)) {
      file = location;
    } else {
      file = modelDir;
      llvm::sys::path::append(file, location);
    }
    ref.file = std::string(file);

    int64_t numElements = 1;
    for (int64_t d : t.dims())
      numElements *= d;
    int64_t bytes = numElements * elementBytes(t.data_type());
    if (ref.length < 0 && bytes > 0)
      ref.length = bytes;
    if (bytes > 0 && ref.length != bytes)
      return emitError(loc) << "initializer '" << t.name() << "' has "
                            << ref.length << " bytes of external data in '"
                            << ref.file << "', expected " << bytes << " for "
                            << elementTypeName(t.data_type()) << " of shape "
                            << shapeText(SmallVector<int64_t>(t.dims().begin(),
                                                              t.dims().end()));

    bool isFloat = t.data_type() == onnx::TensorProto::FLOAT;
    uint64_t fileSize = 0;
    bool present = !llvm::sys::fs::is_directory(ref.file) &&
                   !llvm::sys::fs::file_size(ref.file, fileSize);
    if (!present) {
      if (!isFloat)
        return emitError(loc)
               << "initializer '" << t.name() << "' ("
               << elementTypeName(t.data_type())
               << ") is a constant the importer needs (a shape operand or "
                  "mask), but its data file '"
               << ref.file << "' is missing";
      if (!allowMissingWeights)
        return emitError(loc)
               << "initializer '" << t.name() << "' stores its data in '"
               << ref.file
               << "', which is missing; pass --no-weights to plan without "
                  "stored weights (then run with loom-run --init "
                  "random:SEED)";
    } else {
      if (ref.length < 0)
        ref.length = static_cast<int64_t>(fileSize) - ref.offset;
      if (ref.length < 0 ||
          ref.offset + ref.length > static_cast<int64_t>(fileSize))
        return emitError(loc)
               << "initializer '" << t.name() << "' needs bytes [" << ref.offset
               << ", " << ref.offset + ref.length << ") of '" << ref.file
               << "', which has only " << fileSize << " bytes";
    }

    if (!isFloat) {
      auto data = readExternalData(loc, t.name(), ref);
      if (failed(data))
        return failure();
      t.set_raw_data(std::move(*data));
    } else {
      // ONNX's checker wants exactly one value field; the float values the
      // importer reads (constants, and candidates for tied copies) are read
      // through `floats`.
      if (present)
        floats[t.name()] = ref;
      t.set_raw_data(std::string(1, '\0'));
    }
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
  }
  return floats;
}

FailureOr<std::string>
onnx_import::readExternalData(Location loc, StringRef name,
                              const ExternalTensor &ref) {
  auto buffer =
      llvm::MemoryBuffer::getFileSlice(ref.file, ref.length, ref.offset,
                                       /*IsVolatile=*/false);
  if (!buffer)
    return emitError(loc) << "cannot read the external data of initializer '"
                          << name << "' from '" << ref.file
                          << "': " << buffer.getError().message();
  return (*buffer)->getBuffer().str();
}
