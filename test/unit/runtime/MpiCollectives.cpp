//===- MpiCollectives.cpp - The block collectives over MPI ----------------===//
//
// Under `mpirun -np 4`: every case of CollectiveCases.h (all_gather,
// reduce_scatter, all_to_all on a 2 x 2 mesh, over the group of each mesh
// axis) through MpiCommunicator's sub-communicators, so MPI_Allgather,
// MPI_Reduce_scatter_block and MPI_Alltoall carry the blocks; then a
// bucket's non-blocking sum (MPI_Iallreduce), advanced by `test` while
// the rank works and waited for, against the blocking sum.
//
//===----------------------------------------------------------------------===//

#include "CollectiveCases.h"
#include "runtime/comm/MpiCommunicator.h"

#include <climits>
#include <cstdio>

using namespace loom::runtime;
using namespace loom::runtime::test::collective;

namespace {

/// Runs every case and returns the first failure. A wrong result does not
/// stop the loop, so every rank reaches the same collectives; a case that
/// fails before its collective (verify, bind) fails alike on every rank.
Status runAll(Communicator &world, int &ran) {
  Status first = Status::ok();
  for (const char *op : {"all_gather", "reduce_scatter", "all_to_all"})
    for (const auto &[c, meshAxis] : casesOf(op)) {
      Status s = runCase(c, meshAxis, world);
      if (first.isOk())
        first = s;
      ++ran;
    }
  return first;
}

/// Two buckets in flight at once over the world, advanced while the rank
/// works, then waited for in the other order: each must equal the
/// blocking sum of the same values.
Status bucketsInFlight(Communicator &world, int &ran) {
  const int64_t n = 1 << 16;
  std::vector<float> a(n), b(n), expected(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(valueOf(world.rank(), i % 977));
    b[i] = 2 * a[i];
  }
  expected = a;
  LOOM_RETURN_IF_ERROR(world.allReduceSum(expected.data(), n));
  LOOM_ASSIGN_OR_RETURN(auto first, world.startAllReduceSum(a.data(), n));
  LOOM_ASSIGN_OR_RETURN(auto second, world.startAllReduceSum(b.data(), n));
  double work = 0;
  for (int i = 0; i < 100; ++i) {
    for (int j = 0; j < 1000; ++j)
      work += j * 1e-9;
    LOOM_RETURN_IF_ERROR(first->test().status());
    LOOM_RETURN_IF_ERROR(second->test().status());
  }
  LOOM_RETURN_IF_ERROR(second->wait());
  LOOM_RETURN_IF_ERROR(first->wait());
  ran += 2;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] != expected[i] || b[i] != 2 * expected[i] || work < 0)
      return makeError("bucket sum differs at element %lld: %g and %g, "
                       "expected %g and %g",
                       (long long)i, a[i], b[i], expected[i],
                       2 * expected[i]);
  return Status::ok();
}

/// Ranks r and r ^ 1 both send 8 MiB first and receive after: a send that
/// waited for its receive (MPI's rendezvous for large messages) would
/// deadlock. Then two small messages under one tag arrive in order.
Status sendsDoNotWaitForTheirReceive(Communicator &world, int &ran) {
  int peer = world.rank() ^ 1;
  int64_t n = 2 << 20;
  std::vector<float> out(n), in(n, -1);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(world.rank() * n + i);
  LOOM_ASSIGN_OR_RETURN(auto big,
                        world.startSend(out.data(), n * 4, peer, 3));
  LOOM_RETURN_IF_ERROR(world.recv(in.data(), n * 4, peer, 3));
  LOOM_RETURN_IF_ERROR(big->wait());
  for (int64_t i = 0; i < n; i += 4097)
    if (in[i] != static_cast<float>(peer * n + i))
      return makeError("received %g at %lld, expected %g", in[i],
                       (long long)i, static_cast<float>(peer * n + i));
  for (int v : {world.rank() * 10 + 1, world.rank() * 10 + 2}) {
    LOOM_ASSIGN_OR_RETURN(auto s, world.startSend(&v, sizeof v, peer, 4));
    LOOM_RETURN_IF_ERROR(s->wait()); // v is reused
  }
  for (int k = 1; k <= 2; ++k) {
    int v = 0;
    LOOM_RETURN_IF_ERROR(world.recv(&v, sizeof v, peer, 4));
    if (v != peer * 10 + k)
      return makeError("message %d under tag 4 is %d, expected %d", k, v,
                       peer * 10 + k);
  }
  ran += 3;
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  Status init = initializeMpi(&argc, &argv);
  if (!init.isOk()) {
    std::fprintf(stderr, "loom-rt-mpi-collectives: %s\n",
                 init.message().c_str());
    return 1;
  }
  int code = 0;
  {
    std::unique_ptr<Communicator> world = createMpiWorld();
    int ran = 0;
    Status s =
        world->size() == 4
            ? runAll(*world, ran)
            : makeError("run with mpirun -np 4 (got %d ranks)", world->size());
    if (world->size() == 4) {
      Status buckets = bucketsInFlight(*world, ran);
      if (s.isOk())
        s = buckets;
      Status p2p = sendsDoNotWaitForTheirReceive(*world, ran);
      if (s.isOk())
        s = p2p;
    }
    StatusOr<int> lowest =
        world->allReduceMin(s.isOk() ? INT_MAX : world->rank());
    if (!s.isOk())
      std::fprintf(stderr, "loom-rt-mpi-collectives: rank %d: %s\n",
                   world->rank(), s.message().c_str());
    code = (!lowest.isOk() || *lowest != INT_MAX) ? 1 : 0;
    if (code == 0 && world->rank() == 0)
      std::printf("loom-rt-mpi-collectives: %d cases agree on 4 ranks\n", ran);
  }
  finalizeMpi();
  return code;
}
