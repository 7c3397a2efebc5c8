//===- Slots.h - The devices an elastic job can use --------------*- C++
//-*-===//
//
// Where loom-elastic's ranks may run: the hosts of a hostfile and their
// slots (read again at every start), Slurm's task count, or --np on this
// host; less the slots of ranks that were lost. And the cluster spec loomc
// plans a count of them with.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ELASTIC_SLOTS_H
#define LOOM_RUNTIME_ELASTIC_SLOTS_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::runtime {

struct Host {
  std::string name;
  int64_t slots = 1;
};

/// Parses Open MPI's hostfile format: a host a line, `slots=K` (default 1),
/// `#` comments; other keywords (max_slots) are ignored. Errors name the
/// file and line.
StatusOr<std::vector<Host>> parseHostfile(const std::string &text,
                                          const std::string &path);
StatusOr<std::vector<Host>> readHostfile(const std::string &path);

/// `hosts` less `lost` slots a host (by name; a lost rank whose host is
/// not in the list is ignored), hosts left with none dropped.
std::vector<Host> usableHosts(const std::vector<Host> &hosts,
                              const std::map<std::string, int64_t> &lost);

int64_t totalSlots(const std::vector<Host> &hosts);

/// The first `n` slots of `hosts`, in order, as a hostfile's text.
std::string hostfileFor(const std::vector<Host> &hosts, int64_t n);

/// The devices a plan of at most `n` uses: whole nodes of `perNode` when
/// n >= perNode (a GPU preset), else n; `cpu` uses n.
int64_t usableDevices(const std::string &cluster, int64_t perNode, int64_t n);

/// loomc's --cluster for `n` devices: cpu:N, or NAME:NODESxG (NAME:1xN when
/// n < perNode).
std::string clusterSpec(const std::string &cluster, int64_t perNode, int64_t n);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_ELASTIC_SLOTS_H
