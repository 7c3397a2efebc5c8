//===- MpiSmoke.cpp - A 2-rank data-parallel run against 1 rank -------------===//
//
// Under `mpirun -np 2`: trains the linear-regression plan data-parallel over
// 2 ranks (all_reduce of loss and gradient) and, on each rank, the same
// training on 1 rank in-process; the losses and weights must agree. Then a
// weight sharded over the 2 ranks is gathered on rank 0 (--export-onnx).
// With `--write DIR` (no MPI): writes plans and data for loom_run_cli_test.sh.
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"
#include "runtime/Session.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/data/Npy.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

const int64_t kBatch = 4, kIn = 3, kOut = 2, kSamples = 10;

std::vector<float> series(int64_t n, float a, float b) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = std::sin(a * i + b);
  return v;
}

const std::vector<float> kW0 = series(kIn * kOut, 0.7f, 0.1f);
const HostTensor kX = HostTensor::fromF32({kSamples, kIn}, series(kSamples * kIn, 1.3f, 0.2f));
const HostTensor kY = HostTensor::fromF32({kSamples, kOut}, series(kSamples * kOut, 0.9f, 1.0f));

/// What `loomc m.onnx --forward-only --input-shape x=3x2` would emit for
/// y = x . W: INPUT x, CONSTANT W, OUTPUT y.
plan::Plan forwardPlan() {
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t x = addBuffer(prog, "x", plan::INPUT, {3, 2});
  buffer(prog, x).set_binding("x");
  int32_t w = addBuffer(prog, "W", plan::CONSTANT, {2, 1});
  setData(buffer(prog, w), {2, -1});
  int32_t y = addBuffer(prog, "y", plan::OUTPUT, {3, 1});
  buffer(prog, y).set_binding("y");
  addInst(prog, "matmul", {x, w}, {y});
  return p;
}

int writeFiles(const std::string &dir) {
  Status s = savePlan(forwardPlan(), dir + "/forward.loomplan");
  if (s.isOk())
    s = writeNpy(dir + "/fx.npy", HostTensor::fromF32({3, 2}, {1, 2, 3, 4, 5, 6}));
  if (s.isOk())
    s = savePlan(makeLinearRegressionPlan(2, kBatch, kIn, kOut, 0.05, kW0),
                      dir + "/dp2.loomplan");
  if (s.isOk())
    s = savePlan(makeLinearRegressionPlan(1, kBatch, kIn, kOut, 0.05, kW0),
                 dir + "/dp1.loomplan");
  if (s.isOk())
    s = writeNpy(dir + "/x.npy", kX);
  if (s.isOk())
    s = writeNpy(dir + "/y.npy", kY);
  if (s.isOk())
    s = writeNpy(dir + "/bad_x.npy", HostTensor(ElemType::F32, {kSamples, kIn + 1}));
  if (!s.isOk()) {
    std::fprintf(stderr, "loom-rt-mpi-smoke: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}

Status compare(Communicator &world) {
  LOOM_ASSIGN_OR_RETURN(
      auto parallel,
      Session::create(makeLinearRegressionPlan(2, kBatch, kIn, kOut, 0.05, kW0),
                      world, "dp2"));
  LocalCommunicator local;
  LOOM_ASSIGN_OR_RETURN(
      auto single,
      Session::create(makeLinearRegressionPlan(1, kBatch, kIn, kOut, 0.05, kW0),
                      local, "dp1"));
  for (Session *s : {parallel.get(), single.get()}) {
    LOOM_RETURN_IF_ERROR(s->attachData("x", kX));
    LOOM_RETURN_IF_ERROR(s->attachData("target", kY));
  }
  float firstLoss = 0, lastLoss = 0;
  for (int step = 0; step < 6; ++step) {
    LOOM_RETURN_IF_ERROR(parallel->runStep(step));
    LOOM_RETURN_IF_ERROR(single->runStep(step));
    LOOM_ASSIGN_OR_RETURN(float lp, parallel->loss());
    LOOM_ASSIGN_OR_RETURN(float ls, single->loss());
    if (std::fabs(lp - ls) > 1e-5f * std::max(1.0f, std::fabs(ls)))
      return makeError("step %d: 2-rank loss %.9g differs from 1-rank loss %.9g",
                       step, lp, ls);
    LOOM_ASSIGN_OR_RETURN(HostTensor wp, parallel->readBuffer("W"));
    LOOM_ASSIGN_OR_RETURN(HostTensor ws, single->readBuffer("W"));
    for (int64_t i = 0; i < wp.numel(); ++i)
      if (std::fabs(wp.data<float>()[i] - ws.data<float>()[i]) > 1e-5f)
        return makeError("step %d: W[%lld] differs: %.9g vs %.9g", step,
                         (long long)i, wp.data<float>()[i], ws.data<float>()[i]);
    if (step == 0)
      firstLoss = lp;
    lastLoss = lp;
  }
  if (!(lastLoss < firstLoss))
    return makeError("loss did not decrease: %.9g -> %.9g", firstLoss, lastLoss);
  if (world.rank() == 0)
    std::printf("loom-rt-mpi-smoke: %d ranks agree with 1 rank over 6 steps, "
                "loss %.6f -> %.6f\n",
                world.size(), firstLoss, lastLoss);
  return Status::ok();
}

/// A fused [6, 4] weight in 3 blocks over tp = 2, filled by `--init random`
/// on each rank and gathered on rank 0 over MPI: the whole must be the
/// 1-rank fill.
Status gatherShards(Communicator &world) {
  auto fusedPlan = [](int tp) {
    plan::Plan p = makePlan(tp, false);
    p.mutable_mesh(0)->set_name("tp");
    plan::Program &prog = *p.add_programs();
    for (int r = 0; r < tp; ++r)
      prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    plan::Buffer &w =
        buffer(prog, addBuffer(prog, "qkv", plan::PARAMETER, {6 / tp, 4}));
    w.set_binding("qkv");
    w.mutable_init_rule()->set_std(0.02);
    if (tp > 1) {
      w.add_global_shape(6);
      w.add_global_shape(4);
      w.add_dim_shardings()->add_axes(0);
      w.mutable_dim_shardings(0)->set_blocks(3);
      w.add_dim_shardings();
    }
    return p;
  };
  ParameterInit init{/*random=*/true, /*seed=*/5};
  LOOM_ASSIGN_OR_RETURN(
      auto sharded, Session::create(fusedPlan(2), world, "tp2", nullptr, init));
  LocalCommunicator local;
  LOOM_ASSIGN_OR_RETURN(
      auto whole, Session::create(fusedPlan(1), local, "tp1", nullptr, init));
  LOOM_ASSIGN_OR_RETURN(auto gathered, sharded->parameters(world));
  if (world.rank() != 0)
    return gathered.empty() ? Status::ok()
                            : makeError("rank %d gathered parameters",
                                        world.rank());
  LOOM_ASSIGN_OR_RETURN(HostTensor want, whole->readBuffer("qkv"));
  if (gathered.count("qkv") == 0 || gathered["qkv"].shape != want.shape ||
      gathered["qkv"].toF32() != want.toF32())
    return makeError("the gathered fused weight is not the 1-rank fill");
  std::printf("loom-rt-mpi-smoke: a 3-block weight sharded over %d ranks "
              "gathers to the 1-rank fill\n",
              world.size());
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write") == 0)
    return writeFiles(argv[2]);
  Status init = initializeMpi(&argc, &argv);
  if (!init.isOk()) {
    std::fprintf(stderr, "loom-rt-mpi-smoke: %s\n", init.message().c_str());
    return 1;
  }
  int code = 0;
  {
    std::unique_ptr<Communicator> world = createMpiWorld();
    Status s = world->size() == 2
                   ? compare(*world)
                   : makeError("run with mpirun -np 2 (got %d ranks)", world->size());
    // The ranks agree after each part, so none waits in the gather's
    // collectives for a rank that failed before it.
    StatusOr<int> lowest = world->allReduceMin(s.isOk() ? INT_MAX : world->rank());
    if (lowest.isOk() && *lowest == INT_MAX) {
      s = gatherShards(*world);
      lowest = world->allReduceMin(s.isOk() ? INT_MAX : world->rank());
    }
    if (!s.isOk())
      std::fprintf(stderr, "loom-rt-mpi-smoke: rank %d: %s\n", world->rank(),
                   s.message().c_str());
    code = (!lowest.isOk() || *lowest != INT_MAX) ? 1 : 0;
  }
  finalizeMpi();
  return code;
}
