// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-bucket-all-reduces{cluster=tpu:4}))' -verify-diagnostics

// The buckets' size comes from the cluster's links: a spec that does not
// parse is an error.
shard.grid @mesh(shape = 1x2x1)
// expected-error @+1 {{loom-bucket-all-reduces: bad cluster spec 'tpu:4': unknown preset 'tpu'}}
func.func @bad_cluster(%x: tensor<4xf32>) -> tensor<4xf32> {
  %g = loom.relu %x : tensor<4xf32>
  %s = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  %t = loom.relu %x : tensor<4xf32>
  %u = loom.add %s, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %u : tensor<4xf32>
}
