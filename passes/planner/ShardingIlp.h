//===- ShardingIlp.h - One strategy per op, by integer program --*- C++ -*-===//
//
// The auto-sharding problem as plain data, after XLA's auto-sharding solver
// (`auto_sharding_solver.h`) and Alpa's intra-operator pass: every node (an
// op, or a parameter's layout) chooses one of its strategies; a node costs
// the seconds of its choice, an edge the seconds of resharding between the
// choices of its two ends; the sum of the memory of the nodes on each
// device stays within a budget. CBC solves it (docs/auto-shard.md gives the formulation).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_SHARDINGILP_H
#define LOOM_PASSES_PLANNER_SHARDINGILP_H

#include "llvm/Support/Error.h"

#include <limits>
#include <vector>

namespace mlir::loom::planner {

inline constexpr double kForbidden = std::numeric_limits<double>::infinity();

struct IlpNode {
  /// Seconds of each strategy (kForbidden rules one out).
  std::vector<double> cost;
  /// Bytes each strategy holds on its device for the whole step (empty:
  /// none).
  std::vector<double> memory;
  /// The device whose memory holds it (a pipeline device): the budget
  /// holds on each device.
  int device = 0;
  /// Nodes with the same `group` (>= 0) take the same strategy: identical
  /// layers share their variables, so the solver sees one layer. They must
  /// have as many strategies.
  int group = -1;
};

struct IlpEdge {
  unsigned from = 0, to = 0;
  /// Row-major [strategies of `from`] x [strategies of `to`] seconds;
  /// kForbidden rules a pair out.
  std::vector<double> cost;
  /// Edges with the same `value` (>= 0) are uses of one value: a resharding
  /// of it is made once for all the uses that read it in one layout (the
  /// copies are merged), so they pay each pair of layouts once. The layout
  /// of each strategy of `from` and `to`; the cost of a pair of strategies
  /// is then the cost of its pair of layouts, the same on every edge of the
  /// value (the largest is taken where they differ).
  int value = -1;
  std::vector<int> fromLayout, toLayout;
};

struct IlpRequest {
  std::vector<IlpNode> nodes;
  std::vector<IlpEdge> edges;
  double memoryBudgetBytes = std::numeric_limits<double>::infinity();
  /// When no choice fits the budget: the fastest of those whose busiest
  /// device holds the least, instead of an error (the plan's memory is
  /// checked later as a whole).
  bool leastMemoryOverBudget = false;
  double timeLimitSeconds = 60;
};

struct IlpSolution {
  std::vector<unsigned> choice; // one strategy per node
  double seconds = 0;           // the objective: nodes' plus edges' seconds
  /// The most bytes any device holds.
  double memoryBytes = 0;
  /// Whether CBC proved the choice optimal (false: the best found in the
  /// time limit).
  bool optimal = false;
  unsigned variables = 0, constraints = 0;
  /// Chosen for the least memory, over the budget.
  bool overBudget = false;
};

/// The cheapest choice of one strategy per node within the memory budget;
/// an error when no choice fits or a node has no allowed strategy.
llvm::Expected<IlpSolution> solveShardingIlp(const IlpRequest &request);

/// The objective and memory of `choice` (for checks and reports).
IlpSolution evaluateChoice(const IlpRequest &request,
                           const std::vector<unsigned> &choice);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_SHARDINGILP_H
