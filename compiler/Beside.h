//===- Beside.h - What loomc runs and writes beside the plan ----*- C++ -*-===//
//
// --verify-plan's run of the plan beside its one-device reference (in
// loom-run, which loomc finds next to itself), --emit-sbatch's Slurm
// script, and the files and summary a compile writes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_BESIDE_H
#define LOOM_COMPILER_BESIDE_H

#include "compiler/LoomcOptions.h"
#include "compiler/Summary.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/JointSearch.h"
#include "runtime/PlanFormat.h"

#include <string>

namespace mlir::loom::loomc {

/// `name` next to loomc (the build's bin/ or the install's), absolute.
std::string besideLoomc(llvm::StringRef name);

/// --verify-plan's run: `plan` and its one-device `reference` train 2 steps
/// side by side in `loom-run PLAN --verify-against REF` (loomc links no
/// kernels; loom-run is found next to loomc, or in $LOOM_RUN). The exit
/// code; an error is printed.
int runBeside(const Options &o, const plan::Plan &plan,
              const plan::Plan &reference);

/// `path` made absolute, without `.` and `..`.
std::string absolute(llvm::StringRef path);

/// --emit-sbatch: the batch script for the plan of -o, or for loom-elastic
/// with the training flags loomc was given. The exit code.
int writeSbatch(const Options &o, const Cluster &cluster);

/// Writes what the options ask for: the summary JSON (with the search's
/// `search`, if any), the plan as text, the plan file, the Slurm script,
/// and prints the summary. The exit code.
int writeOutputs(const Options &o, const plan::Plan &plan,
                 const Cluster &cluster, const PlanFigures &figures,
                 const planner::SearchResult *search, double seconds,
                 const std::string &summary, bool training);

} // namespace mlir::loom::loomc

#endif // LOOM_COMPILER_BESIDE_H
