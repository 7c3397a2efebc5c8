//===- MpiCollectives.cpp - The block collectives over MPI ----------------===//
//
// Under `mpirun -np 4`: every case of CollectiveCases.h (all_gather,
// reduce_scatter, all_to_all on a 2 x 2 mesh, over the group of each mesh
// axis) through MpiCommunicator's sub-communicators, so MPI_Allgather,
// MPI_Reduce_scatter_block and MPI_Alltoall carry the blocks.
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
