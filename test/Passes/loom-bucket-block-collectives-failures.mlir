// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-bucket-block-collectives{cluster=tpu:4}))' -verify-diagnostics

// The buckets' size comes from the cluster's links: a spec that does not
// parse is an error.
shard.grid @mesh(shape = 1x2x1)
// expected-error @+1 {{loom-bucket-block-collectives: bad cluster spec 'tpu:4': unknown preset 'tpu'}}
func.func @bad_cluster(%x: tensor<4xf32>) -> tensor<2xf32> {
  %g = loom.relu %x : tensor<4xf32>
  %s = shard.reduce_scatter %g on @mesh grid_axes = [1] scatter_axis = 0 : tensor<4xf32> -> tensor<2xf32>
  %t = loom.relu %s : tensor<2xf32>
  %u = loom.add %s, %t : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %u : tensor<2xf32>
}
