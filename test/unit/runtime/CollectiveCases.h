//===- CollectiveCases.h - Cases of the block collectives -------*- C++ -*-===//
//
// all_gather, reduce_scatter and all_to_all on a 2 x 2 mesh of four ranks,
// each case over the group of one mesh axis, checked element by element
// against the op's definition written out here (group member k is the rank
// whose coordinate on the axis is k). Shared by the unit tests, whose ranks
// are threads (CollectiveTest.cpp), and the MPI run (MpiCollectives.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_COLLECTIVECASES_H
#define LOOM_TEST_UNIT_RUNTIME_COLLECTIVECASES_H

#include "TestPlans.h"
#include "runtime/OpView.h"
#include "runtime/PlanFormat.h"
#include "runtime/comm/Communicator.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/cpu/Bf16.h"
#include "runtime/support/HostTensor.h"

#include <string>
#include <utility>
#include <vector>

namespace loom::runtime::test::collective {

const std::vector<int64_t> kMesh = {2, 2};

inline plan::Plan meshPlan() {
  plan::Plan p = makePlan(4, false);
  p.clear_mesh();
  for (const char *name : {"dp", "tp"}) {
    plan::MeshAxis *axis = p.add_mesh();
    axis->set_name(name);
    axis->set_size(2);
  }
  return p;
}

/// The test value of element `i` of rank `world`'s input: distinct per
/// rank and element, exact in f32 and (as bits) in bf16 storage.
inline int64_t valueOf(int world, int64_t i) { return 1000 * world + i; }

inline void store(uint8_t *at, plan::DType dtype, int64_t i, int64_t v) {
  if (dtype == plan::I64)
    reinterpret_cast<int64_t *>(at)[i] = v;
  else if (dtype == plan::BF16)
    reinterpret_cast<uint16_t *>(at)[i] = static_cast<uint16_t>(v);
  else
    reinterpret_cast<float *>(at)[i] = static_cast<float>(v);
}

inline int64_t load(const uint8_t *at, plan::DType dtype, int64_t i) {
  if (dtype == plan::I64)
    return reinterpret_cast<const int64_t *>(at)[i];
  if (dtype == plan::BF16)
    return reinterpret_cast<const uint16_t *>(at)[i];
  return static_cast<int64_t>(reinterpret_cast<const float *>(at)[i]);
}

inline std::vector<int64_t> unflatten(int64_t i,
                                      const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

inline int64_t flatten(const std::vector<int64_t> &idx,
                       const std::vector<int64_t> &shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    i = i * shape[d] + idx[d];
  return i;
}

/// The world rank of member `k` of `world`'s group along mesh axis `axis`.
inline int member(int world, int64_t axis, int64_t k) {
  std::vector<int64_t> c = meshCoordinates(world, kMesh);
  c[axis] = k;
  return static_cast<int>(flatten(c, kMesh));
}


/// One collective instruction: `x` -> `y` with integer attributes `ints`.
struct Case {
  std::string op;
  std::vector<int64_t> in, out;
  std::vector<std::pair<std::string, int64_t>> ints;
  plan::DType dtype = plan::F32;
};

inline std::string describe(const Case &c, int64_t meshAxis) {
  std::string s = c.op + " " + shapeToString(c.in) + " -> " +
                  shapeToString(c.out) + " in " + dtypeName(c.dtype) +
                  " over mesh axis " + std::to_string(meshAxis);
  for (const auto &[name, v] : c.ints)
    s += ", " + name + " " + std::to_string(v);
  return s;
}

struct Built {
  plan::Plan plan = meshPlan();
  plan::Program *prog = nullptr;
  int32_t x = 0, y = 0;
};

inline void build(Built &b, const Case &c, int64_t meshAxis) {
  b.prog = b.plan.add_programs();
  b.x = addBuffer(*b.prog, "x", plan::CONSTANT, c.in, c.dtype);
  b.y = addBuffer(*b.prog, "y", plan::TEMPORARY, c.out, c.dtype);
  plan::Instruction &inst = addInst(*b.prog, c.op, {b.x}, {b.y});
  setInts(inst, "axes", {meshAxis});
  for (const auto &[name, v] : c.ints)
    setI(inst, name, v);
}

inline int64_t attr(const Case &c, const std::string &name) {
  for (const auto &[n, v] : c.ints)
    if (n == name)
      return v;
  return -1;
}

/// The element `idx` of `y` on rank `world` by the op's definition.
inline int64_t expected(const Case &c, int world, int64_t meshAxis,
                        std::vector<int64_t> idx) {
  int64_t k = meshCoordinates(world, kMesh)[meshAxis]; // group index
  if (c.op == "all_gather") {
    int64_t a = attr(c, "axis");
    int from = member(world, meshAxis, idx[a] / c.in[a]);
    idx[a] %= c.in[a];
    return valueOf(from, flatten(idx, c.in));
  }
  if (c.op == "reduce_scatter") {
    int64_t a = attr(c, "axis");
    idx[a] += k * c.out[a];
    int64_t sum = 0;
    float bf16Sum = 0; // of the values' bf16 bits, as the wrapper widens them
    for (int64_t j = 0; j < 2; ++j) {
      int64_t v = valueOf(member(world, meshAxis, j), flatten(idx, c.in));
      sum += v;
      bf16Sum += cpu::bf16ToFloat(static_cast<uint16_t>(v));
    }
    return c.dtype == plan::BF16 ? cpu::floatToBf16(bf16Sum) : sum;
  }
  // all_to_all: y's block j along concat_axis is rank j's block k along
  // split_axis.
  int64_t split = attr(c, "split_axis"), concat = attr(c, "concat_axis");
  std::vector<int64_t> block = c.in;
  block[split] /= 2;
  int from = member(world, meshAxis, idx[concat] / block[concat]);
  idx[concat] %= block[concat];
  idx[split] += k * block[split];
  return valueOf(from, flatten(idx, c.in));
}

/// Binds `c` directly on this rank of the mesh (`world` has 4 ranks), with
/// the group of mesh axis `meshAxis` (collective: every rank runs the same
/// case), through the CPU backend's bf16 wrapper as the executor binds, and
/// checks every element of `y`.
inline Status runCase(const Case &c, int64_t meshAxis, Communicator &world) {
  Built b;
  build(b, c, meshAxis);
  const plan::Buffer &xb = b.prog->buffers(b.x), &yb = b.prog->buffers(b.y);
  OpView op{b.plan, b.prog->instructions(0), {&xb}, {&yb}};
  const KernelDef *kernel = findKernel(c.op);
  if (!kernel)
    return makeError("no kernel '%s'", c.op.c_str());
  LOOM_RETURN_IF_ERROR(cpu::verifyOnCpu(*kernel, op));
  LOOM_ASSIGN_OR_RETURN(auto group,
                        createAxesCommunicator(world, kMesh, {meshAxis}));
  std::vector<uint8_t> arena(b.prog->arena_bytes());
  for (int64_t i = 0; i < numElements(c.in); ++i)
    store(arena.data() + xb.offset(), c.dtype, i, valueOf(world.rank(), i));
  HostContext ctx(arena, *group);
  cpu::Bf16Scratch scratch;
  scratch.reserve(cpu::Bf16Scratch::floatsFor(op));
  LOOM_ASSIGN_OR_RETURN(KernelFn fn, cpu::bindOnCpu(*kernel, op, ctx, scratch));
  LOOM_RETURN_IF_ERROR(fn(StepContext{}));
  for (int64_t i = 0; i < numElements(c.out); ++i) {
    std::vector<int64_t> idx = unflatten(i, c.out);
    int64_t got = load(arena.data() + yb.offset(), c.dtype, i);
    int64_t want = expected(c, world.rank(), meshAxis, idx);
    if (got != want)
      return makeError("%s: element %s is %lld, expected %lld",
                       describe(c, meshAxis).c_str(),
                       shapeToString(idx).c_str(), (long long)got,
                       (long long)want);
  }
  return Status::ok();
}

/// Every case of `op`: along the first, a middle and the last dim, in
/// every element type the op takes, over each mesh axis.
inline std::vector<std::pair<Case, int64_t>> casesOf(const std::string &op) {
  std::vector<Case> cases;
  auto axes = [](int64_t s, int64_t c) {
    return std::vector<std::pair<std::string, int64_t>>{{"split_axis", s},
                                                        {"concat_axis", c}};
  };
  for (plan::DType dtype : {plan::F32, plan::I64, plan::BF16}) {
    if (op == "all_gather") {
      cases.push_back({op, {2, 3, 2}, {4, 3, 2}, {{"axis", 0}}, dtype});
      cases.push_back({op, {2, 3, 2}, {2, 6, 2}, {{"axis", 1}}, dtype});
      cases.push_back({op, {2, 3, 2}, {2, 3, 4}, {{"axis", 2}}, dtype});
    } else if (op == "reduce_scatter" && dtype != plan::I64) {
      // bf16 buffers run widened to f32 and the sum is rounded back.
      cases.push_back({op, {4, 3, 2}, {2, 3, 2}, {{"axis", 0}}, dtype});
      cases.push_back({op, {2, 4, 2}, {2, 2, 2}, {{"axis", 1}}, dtype});
      cases.push_back({op, {1, 3, 4}, {1, 3, 2}, {{"axis", 2}}, dtype});
    } else if (op == "all_to_all") {
      cases.push_back({op, {4, 3, 2}, {4, 3, 2}, axes(0, 0), dtype});
      cases.push_back({op, {2, 4, 3}, {2, 4, 3}, axes(1, 1), dtype});
      cases.push_back({op, {2, 4, 3}, {4, 2, 3}, axes(1, 0), dtype});
      cases.push_back({op, {4, 3, 2}, {2, 6, 2}, axes(0, 1), dtype});
      cases.push_back({op, {3, 2, 4}, {3, 4, 2}, axes(2, 1), dtype});
    }
  }
  std::vector<std::pair<Case, int64_t>> all;
  for (const Case &c : cases)
    for (int64_t meshAxis : {0, 1})
      all.push_back({c, meshAxis});
  return all;
}

} // namespace loom::runtime::test::collective

#endif // LOOM_TEST_UNIT_RUNTIME_COLLECTIVECASES_H
