//===- LayerName.cpp - A name's kind of layer and its layer index ---------===//

#include "passes/planner/LayerName.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir::loom::planner;

LayerName mlir::loom::planner::splitLayerIndex(llvm::StringRef name) {
  LayerName out;
  llvm::StringRef previous;
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && name[i] != '.' && name[i] != '/')
      continue;
    llvm::StringRef part = name.slice(start, i);
    bool index = !part.empty() && llvm::all_of(part, llvm::isDigit);
    if (index && out.layer.empty())
      out.block = (previous.empty() ? "" : previous.str() + ".") + part.str();
    if (!part.empty())
      previous = part;
    out.kind += index ? "*" : part.str();
    if (index)
      out.layer += (out.layer.empty() ? "" : ".") + part.str();
    if (i < name.size())
      out.kind += name[i];
    start = i + 1;
  }
  return out;
}
