//===- NoFit.h - The planner's "nothing fits the memory" error --*- C++ -*-===//
//
// A planner error whose cause is memory (no sharding, stage split or plan
// fits the devices) carries std::errc::not_enough_memory, so that the
// passes and loomc tell it from the others (loomc's exit code 3).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_NOFIT_H
#define LOOM_PASSES_PLANNER_NOFIT_H

#include "llvm/Support/Error.h"

#include <string>
#include <system_error>

namespace mlir::loom::planner {

/// An error saying that nothing fits the memory.
inline llvm::Error noFitError(const llvm::Twine &message) {
  return llvm::createStringError(
      std::make_error_code(std::errc::not_enough_memory), message);
}

/// Consumes `error` (a failure): its message, and whether it says that
/// nothing fits the memory.
inline std::string takeMessage(llvm::Error error, bool &noFit) {
  noFit = false;
  std::string message;
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase &e) {
    noFit = noFit || e.convertToErrorCode() ==
                         std::make_error_code(std::errc::not_enough_memory);
    message += (message.empty() ? "" : "; ") + e.message();
  });
  return message;
}

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_NOFIT_H
