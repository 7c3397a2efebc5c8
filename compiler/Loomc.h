//===- Loomc.h - The loomc compiler driver ----------------------*- C++ -*-===//

#ifndef LOOM_COMPILER_LOOMC_H
#define LOOM_COMPILER_LOOMC_H

namespace mlir::loom {

/// Runs `loomc` with the given command line; returns the process exit code
/// (0 success, 1 user error with a diagnostic on stderr).
int loomcMain(int argc, char **argv);

} // namespace mlir::loom

#endif // LOOM_COMPILER_LOOMC_H
