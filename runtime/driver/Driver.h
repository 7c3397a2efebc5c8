//===- Driver.h - loom-run as a library function --------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_DRIVER_DRIVER_H
#define LOOM_RUNTIME_DRIVER_DRIVER_H

#include "runtime/driver/Options.h"

namespace loom::runtime {

/// The exit status of a run stopped by a NaN or infinite loss, or by a
/// value --check-numerics found: the inputs were valid but training
/// diverged, which a script sweeping hyper-parameters tells from an error.
constexpr int kExitNonFinite = 3;

/// loom-run's entry point (docs/runtime.md); returns the exit code: 0 on
/// success, 1 after printing one `loom-run: error: ...` line,
/// `kExitNonFinite` after printing one for a non-finite loss or value.
int runMain(int argc, char **argv);

/// `loom-run --forward`: compiles the model with loomc, runs it on one rank
/// and writes the outputs. Returns the exit code.
int runForward(const RunOptions &opts);

/// Prints `loom-run: error: <message>` to stderr.
void printError(const std::string &message);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_DRIVER_H
