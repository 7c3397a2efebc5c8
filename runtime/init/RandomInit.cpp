//===- RandomInit.cpp - Deterministic random parameter values ---*- C++ -*-===//

#include "runtime/init/RandomInit.h"

#include "runtime/support/HostTensor.h"

#include <cmath>

namespace loom::runtime {

namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

/// splitmix64's output function: a bijective 64-bit mix.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// FNV-1a over the name's bytes.
uint64_t hashName(const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

} // namespace

uint64_t randomInitKey(uint64_t seed, const std::string &name) {
  return mix64(mix64(seed + kGolden) ^ hashName(name));
}

double standardNormal(uint64_t key, uint64_t index) {
  // Outputs 2i and 2i+1 of the splitmix64 sequence that starts at `key`.
  uint64_t a = mix64(key + (2 * index + 1) * kGolden);
  uint64_t b = mix64(key + (2 * index + 2) * kGolden);
  double u1 = static_cast<double>((a >> 11) + 1) * 0x1p-53; // (0, 1]
  double u2 = static_cast<double>(b >> 11) * 0x1p-53;       // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) *
         std::cos(6.283185307179586476925 * u2);
}

void fillByInitRule(const plan::InitRule &rule, uint64_t seed,
                    const std::string &name, const ShardLayout &layout,
                    float *dst) {
  const std::vector<int64_t> &local = layout.local;
  int64_t n = numElements(local);
  if (n == 0)
    return;
  if (rule.kind() != plan::InitRule::NORMAL) {
    float v = rule.kind() == plan::InitRule::ONES ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = v;
    return;
  }
  uint64_t key = randomInitKey(seed, name);
  double stddev = rule.std();
  if (local.empty()) {
    dst[0] = static_cast<float>(stddev * standardNormal(key, 0));
    return;
  }
  // Row by row (all dims but the last); each segment of the last dim is a
  // contiguous run of global indices.
  int64_t inner = local.back();
  ShardRows rows(layout);
  int64_t numRows = rows.count();
  const std::vector<ShardSegment> &runs = layout.dims.back();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < numRows; ++r) {
    int64_t base = rows.globalBase(r);
    float *out = dst + r * inner;
    for (const ShardSegment &s : runs)
      for (int64_t j = 0; j < s.length; ++j)
        out[s.localStart + j] = static_cast<float>(
            stddev * standardNormal(
                         key, static_cast<uint64_t>(base + s.globalStart + j)));
  }
}

void fillByInitRule(const plan::InitRule &rule, uint64_t seed,
                    const std::string &name, const std::vector<int64_t> &global,
                    const std::vector<int64_t> &offset,
                    const std::vector<int64_t> &local, float *dst) {
  fillByInitRule(rule, seed, name, blockLayout(global, offset, local), dst);
}

} // namespace loom::runtime
