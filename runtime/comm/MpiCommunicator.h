//===- MpiCommunicator.h - Communicator over MPI ------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_COMM_MPICOMMUNICATOR_H
#define LOOM_RUNTIME_COMM_MPICOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

namespace loom::runtime {

/// Whether the process was started by an MPI launcher (mpirun, srun), judged
/// from the launcher's environment variables.
bool launchedUnderMpi();

/// MPI_Init (errors returned, not fatal, from then on).
Status initializeMpi(int *argc, char ***argv);
/// MPI_Finalize if MPI was initialised and not yet finalised.
void finalizeMpi();

/// A communicator over MPI_COMM_WORLD (after `initializeMpi`).
std::unique_ptr<Communicator> createMpiWorld();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_MPICOMMUNICATOR_H
