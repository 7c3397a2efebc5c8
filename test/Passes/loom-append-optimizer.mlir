// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-append-optimizer))' | FileCheck %s
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-append-optimizer{optimizer=sgd lr=0.1 momentum=0.9}))' | FileCheck %s --check-prefix=SGD
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-append-optimizer{optimizer=sgd}))' | FileCheck %s --check-prefix=PLAIN

// AdamW adds two zero-initialised state arguments per parameter and returns
// the loss, updated parameters, then updated states, with PyTorch defaults.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[W:[^:]*]]: tensor<3x4xf32> {loom.param = "w"}
// CHECK-SAME:    %[[M:[^:]*]]: tensor<3x4xf32> {loom.param = "w", loom.state = "exp_avg"}
// CHECK-SAME:    %[[V:[^:]*]]: tensor<3x4xf32> {loom.param = "w", loom.state = "exp_avg_sq"}
// CHECK-SAME:    -> (tensor<f32> {loom.loss}, tensor<3x4xf32> {loom.param = "w"}, tensor<3x4xf32> {loom.param = "w", loom.state = "exp_avg"}, tensor<3x4xf32> {loom.param = "w", loom.state = "exp_avg_sq"})
// CHECK:         %[[P2:[^,]*]], %[[M2:[^,]*]], %[[V2:[^ ]*]] = loom.adamw %[[W]], %{{.*}}, %[[M]], %[[V]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK:         return %{{.*}}, %[[P2]], %[[M2]], %[[V2]]
// SGD-LABEL:   func.func @main
// SGD-SAME:      {loom.param = "w", loom.state = "momentum"}
// SGD:           loom.sgd %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x4xf32> {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
// PLAIN-LABEL: func.func @main
// PLAIN-NOT:     loom.state
// PLAIN:         loom.sgd %{{.*}}, %{{.*}} {dampening
func.func @main(%w: tensor<3x4xf32> {loom.param = "w"}) -> (tensor<f32> {loom.loss}, tensor<3x4xf32> {loom.grad = "w"}) {
  %l = loom.constant dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<3x4xf32>
}
