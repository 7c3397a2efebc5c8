// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-raise)' | FileCheck %s

// A GPT-2 style block as imported: layer norm, Gemm, tanh GELU, MatMul + Add,
// then an RMS norm: every pattern is raised, and the constants they used go.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME:    %[[G:[^:]*]]: tensor<8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<8xf32>
// CHECK-SAME:    %[[W1:[^:]*]]: tensor<16x8xf32>
// CHECK-SAME:    %[[B1:[^:]*]]: tensor<16xf32>
// CHECK-SAME:    %[[W2:[^:]*]]: tensor<16x8xf32>
// CHECK-SAME:    %[[B2:[^:]*]]: tensor<8xf32>
// CHECK-SAME:    %[[RW:[^:]*]]: tensor<8xf32>
// CHECK:         %[[LN:.*]] = loom.layer_norm %[[X]], %[[G]], %[[B]] axis 1 {epsilon = 1.000000e-05 : f64}
// CHECK:         %[[H:.*]] = loom.linear %[[LN]], %[[W1]], %[[B1]] {transpose_weight}
// CHECK:         %[[A:.*]] = loom.gelu %[[H]] {approximate}
// CHECK:         %[[O:.*]] = loom.linear %[[A]], %[[W2]], %[[B2]] :
// CHECK:         %[[Y:.*]] = loom.rms_norm %[[O]], %[[RW]] axis 1 {epsilon = 9.9999999999999995E-7 : f64}
// CHECK:         return %[[Y]]
// CHECK-NOT:     loom.constant
func.func @main(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.param = "ln.g"}, %arg2: tensor<8xf32> {loom.param = "ln.b"},
                %arg3: tensor<16x8xf32> {loom.param = "fc.w"}, %arg4: tensor<16xf32> {loom.param = "fc.b"},
                %arg5: tensor<16x8xf32> {loom.param = "proj.w"}, %arg6: tensor<8xf32> {loom.param = "proj.b"},
                %arg7: tensor<8xf32> {loom.param = "rms.w"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.sqrt %6 : tensor<4x1xf32>
  %8 = loom.div %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %9 = loom.mul %8, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %10 = loom.add %9, %arg2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %11 = loom.matmul %10, %arg3 {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %12 = loom.add %11, %arg4 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %13 = loom.constant dense<5.000000e-01> : tensor<f32>
  %14 = loom.mul %12, %13 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %15 = loom.constant dense<3.000000e+00> : tensor<f32>
  %16 = loom.pow %12, %15 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %17 = loom.constant dense<4.471500e-02> : tensor<f32>
  %18 = loom.mul %16, %17 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %19 = loom.add %12, %18 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %20 = loom.constant dense<0.797884583> : tensor<f32>
  %21 = loom.mul %19, %20 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %22 = loom.tanh %21 : tensor<4x16xf32>
  %23 = loom.constant dense<1.000000e+00> : tensor<f32>
  %24 = loom.add %22, %23 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %25 = loom.mul %14, %24 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %26 = loom.matmul %25, %arg5 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %27 = loom.add %arg6, %26 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %28 = loom.pow %27, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %29 = loom.reduce_mean %28 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %30 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %31 = loom.add %29, %30 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %32 = loom.sqrt %31 : tensor<4x1xf32>
  %33 = loom.div %23, %32 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %34 = loom.mul %27, %33 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %35 = loom.mul %arg7, %34 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %35 : tensor<4x8xf32>
}
