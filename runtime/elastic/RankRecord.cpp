//===- RankRecord.cpp - How each rank of an elastic job ended -----*- C++
//-*-===//

#include "runtime/elastic/RankRecord.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Exec.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace loom::runtime {

namespace {

const char *outcomeName(RankRecord::Outcome o) {
  switch (o) {
  case RankRecord::Outcome::Running:
    return "running";
  case RankRecord::Outcome::Exited:
    return "exited";
  case RankRecord::Outcome::Killed:
    return "killed";
  case RankRecord::Outcome::Stopped:
    return "stopped";
  }
  return "running";
}

volatile sig_atomic_t stopSignal = 0;
volatile pid_t child = 0;
// The stopped record, written from the signal handler: mpirun's teardown
// may follow its TERM with a KILL before the child has ended.
char stoppedPath[4096];
char stoppedTemp[4096];
char stoppedLine[512];
size_t stoppedLineLength = 0; // up to where the signal's number goes

void onStop(int sig) {
  stopSignal = sig;
  if (child > 0)
    kill(child, sig);
  if (stoppedLineLength == 0)
    return;
  // Async-signal-safe: the signal's digits, then write and rename.
  char line[sizeof(stoppedLine) + 8];
  std::memcpy(line, stoppedLine, stoppedLineLength);
  size_t n = stoppedLineLength;
  if (sig >= 10)
    line[n++] = static_cast<char>('0' + sig / 10);
  line[n++] = static_cast<char>('0' + sig % 10);
  line[n++] = '\n';
  int fd = open(stoppedTemp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return;
  bool whole = write(fd, line, n) == static_cast<ssize_t>(n);
  close(fd);
  if (whole)
    rename(stoppedTemp, stoppedPath);
}

/// This process's rank as the MPI launchers name it.
int64_t launcherRank() {
  for (const char *var :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char *v = std::getenv(var))
      return std::atoll(v);
  return 0;
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0)
    return "localhost";
  return name;
}

} // namespace

std::string recordPath(const std::string &dir, int64_t rank) {
  return dir + "/rank-" + std::to_string(rank);
}

Status writeRecord(const std::string &dir, const RankRecord &r) {
  char line[512];
  std::snprintf(line, sizeof(line), "%s %lld %s %d\n", r.host.c_str(),
                static_cast<long long>(r.pid), outcomeName(r.outcome), r.code);
  return writeFileAtomically(recordPath(dir, r.rank), line);
}

std::optional<RankRecord> readRecord(const std::string &dir, int64_t rank) {
  std::ifstream in(recordPath(dir, rank));
  RankRecord r;
  r.rank = rank;
  std::string outcome;
  long long pid = 0;
  if (!(in >> r.host >> pid >> outcome >> r.code))
    return std::nullopt;
  r.pid = pid;
  for (auto o : {RankRecord::Outcome::Running, RankRecord::Outcome::Exited,
                 RankRecord::Outcome::Killed, RankRecord::Outcome::Stopped})
    if (outcome == outcomeName(o)) {
      r.outcome = o;
      return r;
    }
  return std::nullopt;
}

std::vector<LostRank> lostRanks(const std::string &dir, int64_t worldSize) {
  std::vector<LostRank> killed, silent;
  for (int64_t rank = 0; rank < worldSize; ++rank) {
    std::optional<RankRecord> r = readRecord(dir, rank);
    if (!r)
      silent.push_back({rank, "", "left no record (its host may be gone)"});
    else if (r->outcome == RankRecord::Outcome::Running)
      silent.push_back({rank, r->host,
                        "ended without a word (its wrapper "
                        "was killed)"});
    else if (r->outcome == RankRecord::Outcome::Killed)
      killed.push_back({rank, r->host,
                        "killed by signal " + std::to_string(r->code) + " (" +
                            strsignal(r->code) + ")"});
  }
  // When a rank was killed, mpirun's teardown may have killed the others'
  // wrappers before they wrote a word: only the killed are lost.
  return killed.empty() ? silent : killed;
}

int runRankWrapper(const std::string &dir,
                   const std::vector<std::string> &argv) {
  RankRecord record;
  record.rank = launcherRank();
  record.host = hostName();
  record.pid = getpid();
  struct sigaction sa = {};
  sa.sa_handler = onStop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    sigaction(sig, &sa, nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "loom-elastic: error: cannot start '%s': %s\n",
                 argv[0].c_str(), std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    // The child dies with its wrapper, and takes the default signals back.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    execOrExit(argv, "loom-elastic");
  }
  record.pid = pid;
  std::string path = recordPath(dir, record.rank);
  std::snprintf(stoppedPath, sizeof(stoppedPath), "%s", path.c_str());
  std::snprintf(stoppedTemp, sizeof(stoppedTemp), "%s.stopped", path.c_str());
  int n = std::snprintf(stoppedLine, sizeof(stoppedLine), "%s %lld stopped ",
                        record.host.c_str(), static_cast<long long>(pid));
  (void)writeRecord(dir, record);
  child = pid;
  if (n > 0 && static_cast<size_t>(n) < sizeof(stoppedLine) - 8)
    stoppedLineLength = static_cast<size_t>(n);
  if (stopSignal != 0)
    onStop(stopSignal);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int exitCode = 0;
  if (WIFSIGNALED(status)) {
    record.code = WTERMSIG(status);
    record.outcome = stopSignal != 0 ? RankRecord::Outcome::Stopped
                                     : RankRecord::Outcome::Killed;
    exitCode = 128 + record.code;
  } else {
    record.code = WEXITSTATUS(status);
    record.outcome = RankRecord::Outcome::Exited;
    exitCode = record.code;
  }
  if (Status s = writeRecord(dir, record); !s)
    std::fprintf(stderr, "loom-elastic: warning: %s\n", s.message().c_str());
  return exitCode;
}

} // namespace loom::runtime
