//===- ModelCost.cpp - The model as the joint search costs it ----*- C++ -*-===//

#include "passes/planner/ModelCost.h"

using namespace mlir::loom::planner;

bool ModelCost::uniformLayers() const {
  if (layers.size() <= 1)
    return true;
  // A unique layer (-1) is alike to no other, even another unique one.
  int64_t kind = layers.front().kind;
  if (kind < 0)
    return false;
  for (const PartCost &layer : layers)
    if (layer.kind != kind)
      return false;
  return true;
}
