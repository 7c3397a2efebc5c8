//===- ShardingIlp.cpp - One strategy per op, by integer program -*- C++ -*-===//
//
// Variables: x[n][s] in {0, 1}, node n takes strategy s; e[k][i][j] in
// [0, 1] for an edge k whose two ends both choose. Constraints: each node
// takes one strategy; each edge's e sums over j to x[from][i] and over i to
// x[to][j], so with binary x exactly the chosen pair is 1 (e needs no
// integrality); memory sums within the budget. Nodes with one allowed
// strategy are constants, and an edge with one constant end adds its row
// (or column) to the other end's cost, so only edges between two choosing
// nodes have e variables. The uses of one value (edges with one `value`)
// pay each pair of layouts once: y[v][p][t] in [0, 1] costs the pair, and
// y >= the sum of the pair's e (or x, where an end is constant) on each
// of the value's edges. Seconds are scaled to microseconds for CBC's
// tolerances.
//
//===----------------------------------------------------------------------===//

#include "passes/planner/ShardingIlp.h"
#include "passes/planner/NoFit.h"

#include "Cbc_C_Interface.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <tuple>

using namespace mlir::loom::planner;

namespace {

constexpr double kScale = 1e6; // seconds -> microseconds
constexpr double kUnbounded = 1e300; // beyond CLP's infinity (1e30)

struct CbcDeleter {
  void operator()(Cbc_Model *m) const { Cbc_deleteModel(m); }
};

/// The problem as plain arrays, handed to CBC in one `Cbc_loadProblem`
/// (adding rows one by one resizes CBC's matrix each time: quadratic).
struct Problem {
  std::vector<double> lower, upper, objective;
  std::vector<int> integers;
  std::vector<std::vector<std::pair<int, double>>> columns; // per column
  std::vector<double> rowLower, rowUpper;

  int addColumn(double lb, double ub, double obj, bool integer) {
    lower.push_back(lb);
    upper.push_back(ub);
    objective.push_back(obj);
    columns.emplace_back();
    if (integer)
      integers.push_back(static_cast<int>(lower.size()) - 1);
    return static_cast<int>(lower.size()) - 1;
  }
  void addRow(const std::vector<int> &cols, const std::vector<double> &coefs,
              char sense, double rhs) {
    int row = static_cast<int>(rowLower.size());
    for (size_t i = 0; i < cols.size(); ++i)
      columns[cols[i]].push_back({row, coefs[i]});
    rowLower.push_back(sense == 'L' ? -kUnbounded : rhs);
    rowUpper.push_back(sense == 'G' ? kUnbounded : rhs);
  }

  void load(Cbc_Model *model) const {
    std::vector<CoinBigIndex> start{0};
    std::vector<int> index;
    std::vector<double> value;
    for (const auto &column : columns) {
      for (auto [row, coef] : column) {
        index.push_back(row);
        value.push_back(coef);
      }
      start.push_back(static_cast<CoinBigIndex>(index.size()));
    }
    Cbc_loadProblem(model, static_cast<int>(lower.size()),
                    static_cast<int>(rowLower.size()), start.data(),
                    index.data(), value.data(), lower.data(), upper.data(),
                    objective.data(), rowLower.data(), rowUpper.data());
    for (int col : integers)
      Cbc_setInteger(model, col);
  }
};

double memoryOf(const IlpNode &node, unsigned s) {
  return s < node.memory.size() ? node.memory[s] : 0;
}

/// A value's pair of layouts: (value, producer's layout, user's layout).
using LayoutPair = std::tuple<int, int, int>;

LayoutPair layoutPair(const IlpEdge &edge, size_t i, size_t j) {
  return {edge.value, edge.fromLayout[i], edge.toLayout[j]};
}

/// What each pair of layouts of a shared value costs, once.
std::map<LayoutPair, double> layoutPairCosts(const IlpRequest &request) {
  std::map<LayoutPair, double> costs;
  for (const IlpEdge &edge : request.edges) {
    if (edge.value < 0)
      continue;
    size_t cols = edge.toLayout.size();
    for (size_t i = 0; i < edge.fromLayout.size(); ++i)
      for (size_t j = 0; j < cols; ++j)
        if (double c = edge.cost[i * cols + j]; c != kForbidden) {
          double &slot = costs[layoutPair(edge, i, j)];
          slot = std::max(slot, c);
        }
  }
  return costs;
}

/// The part of an edge's cost that is its own: all of it, or for a use of
/// a shared value only whether the pair is forbidden.
double ownCost(const IlpEdge &edge, double c) {
  return edge.value >= 0 && c != kForbidden ? 0 : c;
}

} // namespace

IlpSolution mlir::loom::planner::evaluateChoice(
    const IlpRequest &request, const std::vector<unsigned> &choice) {
  IlpSolution sol;
  sol.choice = choice;
  std::map<int, double> onDevice;
  for (auto [n, node] : llvm::enumerate(request.nodes)) {
    sol.seconds += node.cost[choice[n]];
    double &bytes = onDevice[node.device];
    bytes += memoryOf(node, choice[n]);
    sol.memoryBytes = std::max(sol.memoryBytes, bytes);
  }
  std::map<LayoutPair, double> shared = layoutPairCosts(request);
  std::set<LayoutPair> paid;
  for (const IlpEdge &edge : request.edges) {
    size_t cols = request.nodes[edge.to].cost.size();
    double c = edge.cost[choice[edge.from] * cols + choice[edge.to]];
    if (edge.value < 0 || c == kForbidden)
      sol.seconds += c;
    else if (LayoutPair key = layoutPair(edge, choice[edge.from],
                                         choice[edge.to]);
             paid.insert(key).second)
      sol.seconds += shared[key];
  }
  return sol;
}

/// The ILP of `request` without groups (an edge may join a node to itself:
/// both ends then take the same strategy). Value v's pairs of layouts cost
/// `copies[v]` times their seconds (identical layers' values, merged).
/// With `leastMemory`, the choice whose busiest device holds the least
/// (seconds break ties) instead, the budget aside.
static llvm::Expected<IlpSolution>
solveUngrouped(const IlpRequest &request,
               const std::map<int, double> &copies = {},
               bool leastMemory = false) {
  size_t numNodes = request.nodes.size();
  for (const IlpEdge &edge : request.edges)
    if (edge.from >= numNodes || edge.to >= numNodes ||
        edge.cost.size() != request.nodes[edge.from].cost.size() *
                                request.nodes[edge.to].cost.size() ||
        (edge.value >= 0 &&
         (edge.fromLayout.size() != request.nodes[edge.from].cost.size() ||
          edge.toLayout.size() != request.nodes[edge.to].cost.size())))
      return llvm::createStringError(
          "sharding ILP: an edge names a missing node or has a cost or "
          "layout table of the wrong size");

  // Costs and allowed strategies after folding edges with a constant end.
  std::vector<std::vector<double>> cost(numNodes);
  for (auto [n, node] : llvm::enumerate(request.nodes))
    cost[n] = node.cost;
  auto allowed = [&](unsigned n) {
    std::vector<unsigned> out;
    for (auto [s, c] : llvm::enumerate(cost[n]))
      if (c != kForbidden)
        out.push_back(s);
    return out;
  };
  // A node with one allowed strategy is a constant; folding an edge into a
  // node can forbid strategies and make it one, so repeat until stable.
  std::vector<int> fixedTo(numNodes, -1);
  std::vector<bool> folded(request.edges.size(), false);
  // An edge from a node to itself costs its diagonal (a shared value's
  // pairs are paid through y below).
  for (auto [k, edge] : llvm::enumerate(request.edges)) {
    if (edge.from != edge.to)
      continue;
    size_t n = cost[edge.from].size();
    for (size_t i = 0; i < n; ++i)
      cost[edge.from][i] += ownCost(edge, edge.cost[i * n + i]);
    folded[k] = true;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (unsigned n = 0; n < numNodes; ++n) {
      std::vector<unsigned> ok = allowed(n);
      if (ok.empty())
        return llvm::createStringError(llvm::formatv(
            "sharding ILP: node {0} has no allowed strategy", n).str());
      if (ok.size() == 1 && fixedTo[n] < 0) {
        fixedTo[n] = ok[0];
        changed = true;
      }
    }
    for (auto [k, edge] : llvm::enumerate(request.edges)) {
      if (folded[k])
        continue;
      size_t cols = request.nodes[edge.to].cost.size();
      if (fixedTo[edge.from] >= 0) {
        for (size_t j = 0; j < cols; ++j)
          cost[edge.to][j] +=
              ownCost(edge, edge.cost[fixedTo[edge.from] * cols + j]);
      } else if (fixedTo[edge.to] >= 0) {
        for (size_t i = 0; i < cost[edge.from].size(); ++i)
          cost[edge.from][i] +=
              ownCost(edge, edge.cost[i * cols + fixedTo[edge.to]]);
      } else {
        continue;
      }
      folded[k] = true;
      changed = true;
    }
  }

  Problem problem;
  std::vector<std::vector<int>> x(numNodes);
  for (unsigned n = 0; n < numNodes; ++n) {
    if (fixedTo[n] >= 0)
      continue;
    for (double c : cost[n]) {
      bool ok = c != kForbidden;
      x[n].push_back(problem.addColumn(0, ok ? 1 : 0, ok ? c * kScale : 0,
                                       /*integer=*/true));
    }
    problem.addRow(x[n], std::vector<double>(x[n].size(), 1.0), 'E', 1.0);
  }
  // Edges between the same two choosing nodes share their e variables.
  std::map<std::pair<unsigned, unsigned>, std::vector<double>> pairCost;
  for (auto [k, edge] : llvm::enumerate(request.edges)) {
    if (folded[k])
      continue;
    std::vector<double> &sum = pairCost[{edge.from, edge.to}];
    if (sum.empty())
      sum.assign(edge.cost.size(), 0);
    for (auto [i, c] : llvm::enumerate(edge.cost))
      sum[i] += ownCost(edge, c);
  }
  std::map<std::pair<unsigned, unsigned>, std::vector<int>> pairColumns;
  for (auto &[ends, table] : pairCost) {
    auto [from, to] = ends;
    size_t rows = cost[from].size(), cols = cost[to].size();
    std::vector<int> &e = pairColumns[ends];
    e.resize(rows * cols);
    for (size_t i = 0; i < rows * cols; ++i) {
      bool ok = table[i] != kForbidden;
      e[i] = problem.addColumn(0, ok ? 1 : 0, ok ? table[i] * kScale : 0,
                               /*integer=*/false);
    }
    for (size_t i = 0; i < rows; ++i) {
      std::vector<int> cols_;
      std::vector<double> coefs;
      for (size_t j = 0; j < cols; ++j) {
        cols_.push_back(e[i * cols + j]);
        coefs.push_back(1);
      }
      cols_.push_back(x[from][i]);
      coefs.push_back(-1);
      problem.addRow(cols_, coefs, 'E', 0);
    }
    for (size_t j = 0; j < cols; ++j) {
      std::vector<int> cols_;
      std::vector<double> coefs;
      for (size_t i = 0; i < rows; ++i) {
        cols_.push_back(e[i * cols + j]);
        coefs.push_back(1);
      }
      cols_.push_back(x[to][j]);
      coefs.push_back(-1);
      problem.addRow(cols_, coefs, 'E', 0);
    }
  }
  // Shared values: each pair of layouts that costs is paid once, when any
  // of the value's uses takes it.
  std::map<LayoutPair, int> y;
  for (auto &[key, c] : layoutPairCosts(request)) {
    auto it = copies.find(std::get<0>(key));
    double times = it == copies.end() ? 1 : it->second;
    if (c > 0)
      y[key] = problem.addColumn(0, 1, times * c * kScale, /*integer=*/false);
  }
  for (const IlpEdge &edge : request.edges) {
    if (edge.value < 0)
      continue;
    int fi = fixedTo[edge.from], fj = fixedTo[edge.to];
    size_t cols = edge.toLayout.size();
    for (auto it = y.lower_bound({edge.value, INT_MIN, INT_MIN});
         it != y.end() && std::get<0>(it->first) == edge.value; ++it) {
      auto [v, p, t] = it->first;
      std::vector<int> terms{it->second};
      std::vector<double> coefs{1};
      for (size_t i = 0; i < edge.fromLayout.size(); ++i) {
        for (size_t j = 0; j < cols; ++j) {
          if ((edge.from == edge.to && i != j) || edge.fromLayout[i] != p ||
              edge.toLayout[j] != t ||
              edge.cost[i * cols + j] == kForbidden ||
              (fi >= 0 && fi != static_cast<int>(i)) ||
              (fj >= 0 && fj != static_cast<int>(j)))
            continue;
          if (fi >= 0 && fj >= 0) {
            problem.lower[it->second] = 1; // both ends constant: paid
            continue;
          }
          terms.push_back(edge.from == edge.to ? x[edge.from][i]
                          : fi >= 0          ? x[edge.to][j]
                          : fj >= 0 ? x[edge.from][i]
                                    : pairColumns[{edge.from, edge.to}]
                                                 [i * cols + j]);
          coefs.push_back(-1);
        }
      }
      if (terms.size() > 1)
        problem.addRow(terms, coefs, 'G', 0);
    }
  }
  // Memory, a row a device: what its constants hold leaves the rest of the
  // budget.
  struct DeviceRow {
    double fixed = 0;
    std::vector<int> cols;
    std::vector<double> coefs;
  };
  std::map<int, DeviceRow> rows;
  for (unsigned n = 0; n < numNodes; ++n) {
    DeviceRow &row = rows[request.nodes[n].device];
    if (fixedTo[n] >= 0) {
      row.fixed += memoryOf(request.nodes[n], fixedTo[n]);
      continue;
    }
    for (auto [s, col] : llvm::enumerate(x[n]))
      if (double m = memoryOf(request.nodes[n], s)) {
        row.cols.push_back(col);
        row.coefs.push_back(m);
      }
  }
  if (leastMemory) {
    // z, the most a device holds, as a fraction of all any device could
    // hold, outweighs every second: each row's sum stays below z.
    double most = 1, seconds = 1;
    for (const IlpNode &node : request.nodes)
      for (auto [s, m] : llvm::enumerate(node.memory)) {
        most += m;
        if (node.cost[s] != kForbidden)
          seconds += std::abs(node.cost[s]) * kScale;
      }
    for (const IlpEdge &edge : request.edges)
      for (double c : edge.cost)
        if (c != kForbidden)
          seconds += std::abs(c) * kScale;
    int z = problem.addColumn(0, kUnbounded, 1e3 * seconds,
                              /*integer=*/false);
    for (auto &[device, row] : rows) {
      std::vector<int> cols = row.cols;
      std::vector<double> coefs;
      for (double c : row.coefs)
        coefs.push_back(c / most);
      cols.push_back(z);
      coefs.push_back(-1);
      problem.addRow(cols, coefs, 'L', -row.fixed / most);
    }
  }
  for (auto &[device, row] : rows) {
    if (leastMemory || !std::isfinite(request.memoryBudgetBytes))
      break;
    double left = request.memoryBudgetBytes - row.fixed;
    if (left < 0)
      return noFitError(llvm::formatv(
          "what cannot be sharded already takes {0} bytes, over the memory "
          "budget of {1} bytes per device",
          row.fixed, request.memoryBudgetBytes).str());
    if (row.cols.empty())
      continue;
    // As fractions of the budget, so the row is well scaled at any size.
    for (double &c : row.coefs)
      c /= request.memoryBudgetBytes;
    problem.addRow(row.cols, row.coefs, 'L', left / request.memoryBudgetBytes);
  }

  std::vector<unsigned> choice(numNodes, 0);
  int numCols = static_cast<int>(problem.lower.size());
  int numRows = static_cast<int>(problem.rowLower.size());
  std::unique_ptr<Cbc_Model, CbcDeleter> model(Cbc_newModel());
  Cbc_setLogLevel(model.get(), 0);
  Cbc_setMaximumSeconds(model.get(), request.timeLimitSeconds);
  if (numCols > 0) {
    problem.load(model.get());
    Cbc_solve(model.get());
    if (Cbc_isProvenInfeasible(model.get()))
      return noFitError(llvm::formatv(
          "no sharding fits the memory budget of {0:F3} MiB per device",
          request.memoryBudgetBytes / (1024.0 * 1024.0)).str());
    const double *sol = Cbc_getColSolution(model.get());
    if (!sol)
      return llvm::createStringError(
          "sharding ILP: CBC found no solution within the time limit");
    for (unsigned n = 0; n < numNodes; ++n) {
      if (fixedTo[n] >= 0)
        continue;
      unsigned best = 0;
      for (auto [s, col] : llvm::enumerate(x[n]))
        if (sol[col] > sol[x[n][best]])
          best = s;
      choice[n] = best;
    }
  }
  for (unsigned n = 0; n < numNodes; ++n)
    if (fixedTo[n] >= 0)
      choice[n] = fixedTo[n];
  IlpSolution result = evaluateChoice(request, choice);
  result.optimal = numCols == 0 || Cbc_isProvenOptimal(model.get());
  result.variables = numCols;
  result.constraints = numRows;
  return result;
}

static llvm::Expected<IlpSolution> solveGrouped(const IlpRequest &request,
                                                bool leastMemory);

llvm::Expected<IlpSolution>
mlir::loom::planner::solveShardingIlp(const IlpRequest &request) {
  llvm::Expected<IlpSolution> solved = solveGrouped(request, false);
  if (solved || !request.leastMemoryOverBudget)
    return solved;
  llvm::consumeError(solved.takeError());
  // Nothing fits: the fastest of the choices that hold the least.
  llvm::Expected<IlpSolution> least = solveGrouped(request, true);
  if (!least)
    return least.takeError();
  IlpRequest within = request;
  within.memoryBudgetBytes = least->memoryBytes * (1 + 1e-9);
  within.leastMemoryOverBudget = false;
  llvm::Expected<IlpSolution> fastest = solveGrouped(within, false);
  if (!fastest) {
    llvm::consumeError(fastest.takeError());
    return least;
  }
  fastest->overBudget = true;
  return fastest;
}

static llvm::Expected<IlpSolution> solveGrouped(const IlpRequest &request,
                                                bool leastMemory) {
  // Each group becomes one node: its members' costs and memory summed, its
  // members' edges its own. Members on another device than the group's
  // first put their memory on a shadow node there, which costs nothing and
  // takes the group's strategy (an edge forbids the others).
  std::vector<unsigned> index(request.nodes.size());
  std::map<int, unsigned> groupIndex;
  std::map<std::pair<int, int>, unsigned> shadowIndex; // (group, device)
  std::vector<IlpEdge> shadowEdges;
  bool grouped = false;
  IlpRequest reduced;
  reduced.memoryBudgetBytes = request.memoryBudgetBytes;
  reduced.timeLimitSeconds = request.timeLimitSeconds;
  auto addNode = [&](const IlpNode &like, double cost, int device) {
    IlpNode node;
    node.cost.assign(like.cost.size(), cost);
    node.memory.assign(like.cost.size(), 0);
    node.device = device;
    reduced.nodes.push_back(std::move(node));
    return unsigned(reduced.nodes.size() - 1);
  };
  for (auto [n, node] : llvm::enumerate(request.nodes)) {
    auto [it, added] =
        node.group < 0 ? std::pair{groupIndex.end(), true}
                       : groupIndex.try_emplace(node.group,
                                                reduced.nodes.size());
    if (added) {
      index[n] = addNode(node, 0, node.device);
    } else {
      index[n] = it->second;
      grouped = true;
    }
    IlpNode &merged = reduced.nodes[index[n]];
    if (merged.cost.size() != node.cost.size())
      return llvm::createStringError(llvm::formatv(
          "sharding ILP: the nodes of group {0} have different numbers of "
          "strategies", node.group).str());
    for (auto [s, c] : llvm::enumerate(node.cost))
      merged.cost[s] += c;
    unsigned holder = index[n];
    if (node.device != merged.device) {
      auto [shadow, made] =
          shadowIndex.try_emplace({node.group, node.device}, 0);
      if (made) {
        shadow->second = addNode(node, 0, node.device);
        IlpEdge same{index[n], shadow->second, {}};
        size_t k = node.cost.size();
        for (size_t i = 0; i < k; ++i)
          for (size_t j = 0; j < k; ++j)
            same.cost.push_back(i == j ? 0 : kForbidden);
        shadowEdges.push_back(std::move(same));
      }
      holder = shadow->second;
    }
    for (size_t s = 0; s < node.cost.size(); ++s)
      reduced.nodes[holder].memory[s] += memoryOf(node, s);
  }
  if (!grouped)
    return solveUngrouped(request, {}, leastMemory);
  for (IlpEdge &e : shadowEdges)
    reduced.edges.push_back(std::move(e));
  // A shared value whose uses map onto the same edges as another's (the
  // same value of another layer) merges with it: its pairs cost once per
  // copy, with one set of rows.
  std::map<int, std::vector<IlpEdge>> usesOf;
  for (const IlpEdge &edge : request.edges) {
    if (edge.from >= request.nodes.size() || edge.to >= request.nodes.size())
      return llvm::createStringError(
          "sharding ILP: an edge names a missing node");
    IlpEdge mapped = edge;
    mapped.from = index[edge.from];
    mapped.to = index[edge.to];
    if (edge.value >= 0)
      usesOf[edge.value].push_back(std::move(mapped));
    else
      reduced.edges.push_back(std::move(mapped));
  }
  auto signature = [](const std::vector<IlpEdge> &uses) {
    std::vector<std::tuple<unsigned, unsigned, std::vector<int>,
                           std::vector<int>, std::vector<double>>>
        out;
    for (const IlpEdge &e : uses)
      out.emplace_back(e.from, e.to, e.fromLayout, e.toLayout, e.cost);
    std::sort(out.begin(), out.end());
    return out;
  };
  std::map<decltype(signature({})), int> merged;
  std::map<int, double> copies;
  for (auto &[value, uses] : usesOf) {
    auto [it, added] = merged.try_emplace(signature(uses), value);
    copies[it->second] += 1;
    if (!added)
      continue;
    for (IlpEdge &e : uses)
      reduced.edges.push_back(std::move(e));
  }
  llvm::Expected<IlpSolution> solved =
      solveUngrouped(reduced, copies, leastMemory);
  if (!solved)
    return solved.takeError();
  std::vector<unsigned> choice(request.nodes.size());
  for (size_t n = 0; n < choice.size(); ++n)
    choice[n] = solved->choice[index[n]];
  IlpSolution result = evaluateChoice(request, choice);
  result.optimal = solved->optimal;
  result.variables = solved->variables;
  result.constraints = solved->constraints;
  return result;
}
