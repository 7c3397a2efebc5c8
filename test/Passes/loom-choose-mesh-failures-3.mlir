// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=4 tp=3})'

// tp must divide the devices.
// expected-error @+1 {{tp = 3 x pp = 1 does not divide the 4 device(s) of the cluster; use a tp that divides 4}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}
