//===- Supervisor.h - loom-elastic's plan, run, re-plan loop -----*- C++
//-*-===//
//
// Plans the model for the devices left (loomc as a process), runs the ranks
// (mpirun as a process, each rank under the wrapper of RankRecord.h), and
// after a lost rank plans again for fewer and resumes from the newest
// checkpoint (docs/elastic.md). Never links MLIR or MPI.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ELASTIC_SUPERVISOR_H
#define LOOM_RUNTIME_ELASTIC_SUPERVISOR_H

namespace loom::runtime {

/// loom-elastic's main: the supervisor, or with `--rank-wrapper DIR --
/// CMD...` as its first arguments the wrapper of one rank.
int elasticMain(int argc, char **argv);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_ELASTIC_SUPERVISOR_H
