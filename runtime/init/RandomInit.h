//===- RandomInit.h - Deterministic random parameter values -----*- C++ -*-===//
//
// `loom-run --init random:SEED` fills every PARAMETER by its plan rule
// (`Buffer.init_rule`) with values that depend only on the seed, the
// parameter's name and each element's index in the global (unsharded)
// tensor: a counter-based generator (splitmix64's output function over a
// per-element counter) feeds a Box-Muller transform. So the values are the
// same whatever the rank count, the shard a rank holds, the thread count or
// the device, and a shard is exactly the slice of the unsharded tensor.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_INIT_RANDOMINIT_H
#define LOOM_RUNTIME_INIT_RANDOMINIT_H

#include "runtime/ShardLayout.h"
#include "runtime/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// Where PARAMETER buffers get their first values.
struct ParameterInit {
  /// false: from the plan (its ONNX initializers or data); true: by each
  /// parameter's init rule from `seed`.
  bool random = false;
  uint64_t seed = 0;
};

/// The key of parameter `name`'s stream under `seed`.
uint64_t randomInitKey(uint64_t seed, const std::string &name);

/// A standard normal sample: element `index` of the stream `key`.
double standardNormal(uint64_t key, uint64_t index);

/// Fills `dst`, this rank's shard of parameter `name` (shape
/// `layout.local`, laid out in the global tensor as `layout` says), by
/// `rule`: NORMAL draws `rule.std() * standardNormal(key, i)` for global
/// row-major element `i`, ONES and ZEROS are constants. So a shard holds
/// exactly its elements of the unsharded fill.
void fillByInitRule(const plan::InitRule &rule, uint64_t seed,
                    const std::string &name, const ShardLayout &layout,
                    float *dst);

/// The same for the block of shape `local` at `offset` in the global tensor
/// of shape `global` (all three of the same rank).
void fillByInitRule(const plan::InitRule &rule, uint64_t seed,
                    const std::string &name, const std::vector<int64_t> &global,
                    const std::vector<int64_t> &offset,
                    const std::vector<int64_t> &local, float *dst);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_INIT_RANDOMINIT_H
