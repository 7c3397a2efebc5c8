//===- LayerNameTest.cpp - A name's kind of layer and its index ----------===//

#include "passes/planner/LayerName.h"

#include <gtest/gtest.h>

using namespace mlir::loom::planner;

namespace {

TEST(LayerNameTest, InitializerNames) {
  LayerName n = splitLayerIndex("transformer.h.11.mlp.c_fc.weight");
  EXPECT_EQ(n.kind, "transformer.h.*.mlp.c_fc.weight");
  EXPECT_EQ(n.layer, "11");
}

TEST(LayerNameTest, NodeNames) {
  // Digits inside a component (Add_1, c_fc) are part of the name.
  LayerName n = splitLayerIndex("/transformer/h.3/Add_1");
  EXPECT_EQ(n.kind, "/transformer/h.*/Add_1");
  EXPECT_EQ(n.layer, "3");
  LayerName nested = splitLayerIndex("encoder.layers.2.blocks.0.attn");
  EXPECT_EQ(nested.kind, "encoder.layers.*.blocks.*.attn");
  EXPECT_EQ(nested.layer, "2.0");
}

TEST(LayerNameTest, NamesWithoutALayer) {
  for (const char *name : {"transformer.wte.weight", "onnx::MatMul_470", ""}) {
    LayerName n = splitLayerIndex(name);
    EXPECT_EQ(n.kind, name);
    EXPECT_EQ(n.layer, "");
  }
}

} // namespace
