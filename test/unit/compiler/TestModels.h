//===- TestModels.h - Small forward functions the compiler tests share -===//

#ifndef LOOM_TEST_UNIT_COMPILER_TESTMODELS_H
#define LOOM_TEST_UNIT_COMPILER_TESTMODELS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::loom::test {

/// Two linear layers with a ReLU between: 8 samples of 64 features.
inline constexpr llvm::StringLiteral kTwoLinears = R"(
func.func @main(%x: tensor<8x64xf32> {loom.input = "x"},
    %w1: tensor<64x128xf32> {loom.param = "fc1.weight"}, %b1: tensor<128xf32> {loom.param = "fc1.bias"},
    %w2: tensor<128x64xf32> {loom.param = "fc2.weight"}, %b2: tensor<64xf32> {loom.param = "fc2.bias"})
    -> (tensor<8x64xf32> {loom.output = "y"}) {
  %h = loom.linear %x, %w1, %b1 : (tensor<8x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<8x128xf32>
  %r = loom.relu %h : tensor<8x128xf32>
  %y = loom.linear %r, %w2, %b2 : (tensor<8x128xf32>, tensor<128x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
)";

} // namespace mlir::loom::test

#endif // LOOM_TEST_UNIT_COMPILER_TESTMODELS_H
