//===- RunFlags.h - The names of loom-run's flags ----------------*- C++
//-*-===//
//
// One list of loom-run's flags, read by its parser and by loom-elastic, which
// hands the training flags of its command line to the loom-run it starts and
// the rest to loomc (docs/elastic.md).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DRIVER_RUNFLAGS_H
#define LOOM_RUNTIME_DRIVER_RUNFLAGS_H

#include <string_view>

namespace loom::runtime {

/// Training flags that take a value (`--flag V` or `--flag=V`).
inline constexpr std::string_view kTrainingValueFlags[] = {
    "--data",         "--tokens",         "--tokens-dtype",
    "--steps",        "--seed",           "--order",
    "--valid-data",   "--valid-tokens",   "--eval-every",
    "--eval-batches", "--init",           "--metrics",
    "--export-onnx",  "--log-every",      "--device",
    "--collectives",  "--checkpoint-dir", "--checkpoint-every",
    "--keep"};

/// Training flags that take none.
inline constexpr std::string_view kTrainingSwitches[] = {
    "--quiet", "--check-numerics", "--resume"};

/// Flags of the other modes (--forward, --verify-against) and `--model`,
/// which take a value.
inline constexpr std::string_view kOtherValueFlags[] = {
    "--input",     "--output-dir", "--forward",
    "--precision", "--model",      "--verify-against", "--profile"};

inline bool isTrainingValueFlag(std::string_view flag) {
  for (std::string_view f : kTrainingValueFlags)
    if (f == flag)
      return true;
  return false;
}

inline bool isTrainingSwitch(std::string_view flag) {
  for (std::string_view f : kTrainingSwitches)
    if (f == flag)
      return true;
  return false;
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_RUNFLAGS_H
