//===- OnnxOps.cpp - The table of ONNX op converters ------------*- C++ -*-===//
//
// The converters live with their op family: OnnxMathOps.cpp (element-wise,
// linear algebra, softmax, reductions), OnnxShapeOps.cpp (layout, indexing),
// OnnxValueOps.cpp (known values), OnnxNNOps.cpp (normalisation,
// convolution, pooling) and OnnxComposedOps.cpp (ops built from other loom
// ops); known inputs fold in OnnxFolding*.cpp. This file merges their tables.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include <vector>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

ArrayRef<OpConverter> onnx_import::getOpConverters() {
  static const std::vector<OpConverter> table = [] {
    std::vector<OpConverter> all;
    for (ArrayRef<OpConverter> family :
         {getMathOpConverters(), getShapeOpConverters(), getValueOpConverters(),
          getNNOpConverters(), getComposedOpConverters(),
          getComposedMathConverters()})
      all.insert(all.end(), family.begin(), family.end());
    llvm::sort(all, [](const OpConverter &a, const OpConverter &b) {
      return StringRef(a.opType) < StringRef(b.opType);
    });
    return all;
  }();
  return table;
}

const OpConverter *onnx_import::lookupOpConverter(StringRef opType,
                                                  int64_t opset) {
  for (const OpConverter &c : getOpConverters())
    if (opType == c.opType && opset >= c.minOpset && opset <= c.maxOpset)
      return &c;
  return nullptr;
}
