//===- Metrics.cpp - Per-step metrics as JSON lines --------------*- C++ -*-===//

#include "runtime/Metrics.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace loom::runtime {

namespace {

std::string number(double v, const char *fmt) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

} // namespace

/// `,"stages":[{...},...]`, or nothing without stages.
static std::string stagesJson(const std::vector<StageMetrics> &stages) {
  if (stages.empty())
    return "";
  std::string s = ",\"stages\":[";
  for (size_t i = 0; i < stages.size(); ++i)
    s += std::string(i ? "," : "") + "{\"micro_batches_in_flight\":" +
         std::to_string(stages[i].microBatchesInFlight) +
         ",\"pipeline_wait_s\":" + number(stages[i].waitS, "%.6g") +
         ",\"bubble_fraction\":" + number(stages[i].bubbleFraction, "%.4g") +
         "}";
  return s + "]";
}

std::string formatMetrics(const StepMetrics &m) {
  return "{\"step\":" + std::to_string(m.step) +
         ",\"loss\":" + number(m.loss, "%.9g") +
         (m.evalLoss ? ",\"eval_loss\":" + number(*m.evalLoss, "%.9g")
                     : std::string()) +
         ",\"step_time_s\":" + number(m.stepTimeS, "%.6g") +
         ",\"tokens_per_s\":" + number(m.tokensPerS, "%.6g") +
         ",\"samples_per_s\":" + number(m.samplesPerS, "%.6g") +
         ",\"peak_memory_bytes\":" + std::to_string(m.peakMemoryBytes) +
         ",\"arena_bytes\":" + std::to_string(m.arenaBytes) +
         ",\"workspace_bytes\":" + std::to_string(m.workspaceBytes) +
         (m.deviceMemoryUsedBytes >= 0
              ? ",\"device_memory_used_bytes\":" +
                    std::to_string(m.deviceMemoryUsedBytes)
              : std::string()) +
         (m.commExposedS >= 0
              ? ",\"comm_exposed_s\":" + number(m.commExposedS, "%.6g")
              : std::string()) +
         stagesJson(m.stages) + "}";
}

/// The length of the leading lines of the metrics file `fd` whose steps
/// are 1..`lastStep` in order (each `{"step":N,...}` and a newline).
static off_t keptLength(int fd, int64_t lastStep) {
  std::string text;
  char block[1 << 16];
  ssize_t n;
  while ((n = ::pread(fd, block, sizeof block,
                      static_cast<off_t>(text.size()))) > 0)
    text.append(block, static_cast<size_t>(n));
  const std::string prefix = "{\"step\":";
  size_t at = 0;
  for (int64_t step = 1; step <= lastStep; ++step) {
    size_t end = text.find('\n', at);
    std::string expected = prefix + std::to_string(step) + ",";
    if (end == std::string::npos ||
        text.compare(at, expected.size(), expected) != 0)
      break;
    at = end + 1;
  }
  return static_cast<off_t>(at);
}

StatusOr<std::unique_ptr<MetricsWriter>>
MetricsWriter::open(const std::string &path, int64_t keepThroughStep) {
  std::unique_ptr<MetricsWriter> w(new MetricsWriter());
  w->path = path;
  // Locked before it is emptied: a second run given the same file is
  // refused instead of interleaving its lines with the first's.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return makeError("cannot create metrics file '%s': %s", path.c_str(),
                     std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      return makeError("metrics file '%s' is being written by another run; "
                       "give each run its own --metrics file",
                       path.c_str());
    return makeError("cannot lock metrics file '%s': %s", path.c_str(),
                     std::strerror(err));
  }
  off_t kept = keepThroughStep > 0 ? keptLength(fd, keepThroughStep) : 0;
  if (::ftruncate(fd, kept) != 0 || ::lseek(fd, kept, SEEK_SET) < 0 ||
      !(w->file = ::fdopen(fd, "w"))) {
    int err = errno;
    ::close(fd);
    return makeError("cannot write metrics file '%s': %s", path.c_str(),
                     std::strerror(err));
  }
  return w;
}

MetricsWriter::~MetricsWriter() {
  if (file)
    std::fclose(file);
}

Status MetricsWriter::write(const StepMetrics &m) {
  std::string line = formatMetrics(m) + "\n";
  if (std::fputs(line.c_str(), file) < 0 || std::fflush(file) != 0)
    return makeError("cannot write metrics file '%s': %s", path.c_str(),
                     std::strerror(errno));
  return Status::ok();
}

} // namespace loom::runtime
