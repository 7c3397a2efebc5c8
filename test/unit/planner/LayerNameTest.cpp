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

TEST(LayerNameTest, BlockIsTheOutermostNumberedModule) {
  // The same in a node name and its parameter's name; nested numbers stay
  // in their block, and stages of one index apart.
  for (auto [name, block] :
       {std::pair{"/transformer/h.3/attn/Add", "h.3"},
        {"transformer.h.3.attn.c_attn.weight", "h.3"},
        {"/features/features.3/conv/conv.0/conv.0.0/Conv", "features.3"},
        {"features.3.conv.0.0.weight", "features.3"},
        {"/layer2/layer2.0/conv1/Conv", "layer2.0"},
        {"layer2.0.conv1.weight", "layer2.0"},
        {"/encoder/block.1/layer.0/SelfAttention/q/MatMul", "block.1"},
        {"/0/Add", "0"}})
    EXPECT_EQ(splitLayerIndex(name).block, block) << name;
}

TEST(LayerNameTest, NamesWithoutALayer) {
  for (const char *name : {"transformer.wte.weight", "onnx::MatMul_470", ""}) {
    LayerName n = splitLayerIndex(name);
    EXPECT_EQ(n.kind, name);
    EXPECT_EQ(n.layer, "");
    EXPECT_EQ(n.block, "");
  }
}

} // namespace
