//===- NodeName.h - The ONNX node an op was imported from -------*- C++ -*-===//
//
// The importer gives each op the `NameLoc` of its ONNX node; ops that a pass
// fuses carry a `FusedLoc` of their nodes' locations, and the backward ops
// their forward op's.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IR_NODENAME_H
#define LOOM_IR_NODENAME_H

#include "mlir/IR/Location.h"

namespace mlir::loom {

/// The ONNX node name in `loc` (the first one of a fused location), or "".
inline StringRef onnxNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().getValue();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(inner))
        return name.getName().getValue();
  return "";
}

} // namespace mlir::loom

#endif // LOOM_IR_NODENAME_H
