//===- Supervisor.cpp - loom-elastic's plan, run, re-plan loop ----*- C++
//-*-===//

#include "runtime/elastic/Supervisor.h"
#include "runtime/elastic/ElasticOptions.h"
#include "runtime/elastic/RankRecord.h"
#include "runtime/elastic/Slots.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Exec.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace loom::runtime {

namespace {

volatile sig_atomic_t stopRequest = 0;
void onStopRequest(int sig) { stopRequest = sig; }

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::fputs("loom-elastic: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
}

int fail(const Status &s) {
  std::fprintf(stderr, "loom-elastic: error: %s\n", s.message().c_str());
  return 1;
}

/// `name` next to this executable when it is there, else `name` (PATH).
std::string besideSelf(const std::string &name) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / name, ec))
    return (self.parent_path() / name).string();
  return name;
}

/// Starts `argv`; its output goes to `log` when given.
pid_t spawn(const std::vector<std::string> &argv, const std::string &log) {
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  if (!log.empty()) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
  }
  execOrExit(argv, "loom-elastic");
}

/// The exit status of a waited process (128 + signal when killed).
int exitStatus(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The first line of `log` that says `error:`, else its last line.
std::string errorLine(const std::string &log) {
  std::istringstream in(readText(log));
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find("error:") != std::string::npos)
      return line;
    if (!line.empty())
      last = line;
  }
  return last;
}

class Supervisor {
public:
  explicit Supervisor(ElasticOptions opts) : opts(std::move(opts)) {}
  int run();

private:
  /// The devices usable now, or an error when they cannot be read.
  StatusOr<int64_t> availableDevices();
  /// Plans for at most `n` devices (fewer when loomc cannot split over n);
  /// the count planned for and the plan's path in `plan`.
  StatusOr<int64_t> planFor(int64_t n, std::string &plan);
  /// Runs one attempt; its mpirun's exit status, with `resized` set when
  /// the hostfile changed under it and it was stopped for that.
  int runAttempt(const std::vector<std::string> &cmd, int64_t n, bool &resized);
  int64_t perNode() const;

  ElasticOptions opts;
  std::string work;
  std::string hostfileText; // the hostfile as last read
  std::vector<Host> hosts;  // its hosts (empty without --hostfile)
  std::map<std::string, int64_t> lostOnHost;
  int64_t lostHere = 0; // lost ranks without a hostfile
  std::set<int64_t> planned;
};

int64_t Supervisor::perNode() const {
  if (opts.devicesPerNode > 0)
    return opts.devicesPerNode;
  if (!hosts.empty())
    return hosts.front().slots;
  return 0;
}

StatusOr<int64_t> Supervisor::availableDevices() {
  int64_t n = 0;
  if (!opts.hostfile.empty()) {
    std::string text = readText(opts.hostfile);
    LOOM_ASSIGN_OR_RETURN(std::vector<Host> found,
                          parseHostfile(text, opts.hostfile));
    if (text != hostfileText)
      lostOnHost.clear(); // the hostfile is the truth again
    hostfileText = text;
    hosts = found;
    n = totalSlots(usableHosts(hosts, lostOnHost));
    if (opts.np > 0)
      n = std::min(n, opts.np);
  } else if (opts.np > 0) {
    n = opts.np - lostHere;
  } else if (const char *tasks = std::getenv("SLURM_NTASKS")) {
    n = std::atoll(tasks) - lostHere;
  } else {
    return makeError("how many devices? give --np N, --hostfile H, or run "
                     "inside a Slurm allocation");
  }
  return n;
}

StatusOr<int64_t> Supervisor::planFor(int64_t available, std::string &plan) {
  std::string lastError;
  int64_t first = usableDevices(opts.cluster, perNode(), available);
  for (int64_t n = first; n >= opts.minNp;
       n = usableDevices(opts.cluster, perNode(), n - 1)) {
    plan = work + "/plan-" + std::to_string(n) + ".loomplan";
    if (planned.count(n))
      return n;
    std::string spec = clusterSpec(opts.cluster, perNode(), n);
    std::string log = work + "/loomc-" + std::to_string(n) + ".log";
    std::vector<std::string> cmd = {opts.loomc, opts.model, "--cluster", spec};
    cmd.insert(cmd.end(), opts.loomcArgs.begin(), opts.loomcArgs.end());
    cmd.insert(cmd.end(), {"-o", plan});
    pid_t pid = spawn(cmd, log);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    int code = exitStatus(status);
    if (code == 0) {
      planned.insert(n);
      say("planned for %lld device(s) (--cluster %s) in %s",
          static_cast<long long>(n), spec.c_str(), plan.c_str());
      return n;
    }
    lastError = errorLine(log);
    // loomc's exit codes (docs/loomc.md): a model it does not support (2)
    // or its own error (4) does not plan on fewer devices either.
    if (code == 2 || code == 4)
      return makeError("loomc cannot plan the model (exit %d): %s", code,
                       lastError.c_str());
    say("no plan for %lld device(s): %s", static_cast<long long>(n),
        lastError.c_str());
    if (n == 1)
      break;
  }
  return makeError("no plan for any count of devices from %lld down to "
                   "--min-np %lld (loomc said: %s)",
                   static_cast<long long>(first),
                   static_cast<long long>(opts.minNp), lastError.c_str());
}

int Supervisor::runAttempt(const std::vector<std::string> &cmd, int64_t n,
                           bool &resized) {
  resized = false;
  pid_t pid = spawn(cmd, "");
  auto lastCheck = std::chrono::steady_clock::now();
  bool signalled = false;
  for (;;) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid)
      return exitStatus(status);
    if (done < 0 && errno != EINTR)
      return 1;
    if (stopRequest != 0 && !signalled) {
      kill(pid, SIGTERM);
      signalled = true;
    }
    auto now = std::chrono::steady_clock::now();
    if (!signalled && !opts.hostfile.empty() &&
        now - lastCheck > std::chrono::seconds(1)) {
      lastCheck = now;
      std::string text = readText(opts.hostfile);
      if (text != hostfileText) {
        StatusOr<std::vector<Host>> found = parseHostfile(text, opts.hostfile);
        int64_t offered =
            found ? usableDevices(opts.cluster, perNode(),
                                  std::min(totalSlots(*found),
                                           opts.np > 0 ? opts.np : INT64_MAX))
                  : n;
        if (found && offered != n) {
          say("the hostfile now offers %lld device(s); stopping the %lld "
              "rank(s) to restart on them from the newest checkpoint",
              static_cast<long long>(offered), static_cast<long long>(n));
          kill(pid, SIGTERM);
          signalled = true;
          resized = true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int Supervisor::run() {
  if (opts.loomc.empty())
    opts.loomc = besideSelf("loomc");
  if (opts.loomRun.empty())
    opts.loomRun = besideSelf("loom-run");
  if (opts.mpirun.empty())
    opts.mpirun = "mpirun";
  work = opts.checkpointDir + "/.elastic";
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec)
    return fail(makeError("cannot create '%s': %s", work.c_str(),
                          ec.message().c_str()));
  struct sigaction sa = {};
  sa.sa_handler = onStopRequest;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    sigaction(sig, &sa, nullptr);

  // The ranks' wrapper is this very binary.
  std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec)
    return fail(makeError("cannot find this program (/proc/self/exe): %s",
                          ec.message().c_str()));
  int64_t restarts = 0;
  for (int64_t attempt = 0;; ++attempt) {
    StatusOr<int64_t> available = availableDevices();
    if (!available)
      return fail(available.status());
    if (*available < opts.minNp)
      return fail(makeError("%lld device(s) left, fewer than --min-np %lld",
                            static_cast<long long>(*available),
                            static_cast<long long>(opts.minNp)));
    std::string plan;
    StatusOr<int64_t> n = planFor(*available, plan);
    if (!n)
      return fail(n.status());

    std::string dir = work + "/attempt-" + std::to_string(attempt);
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    std::vector<std::string> cmd = {opts.mpirun, "-np", std::to_string(*n)};
    std::vector<Host> used = usableHosts(hosts, lostOnHost);
    if (!opts.hostfile.empty()) {
      std::string file = dir + "/hostfile";
      if (Status s = writeFileAtomically(file, hostfileFor(used, *n)); !s)
        return fail(s);
      cmd.insert(cmd.end(), {"--hostfile", file});
    }
    cmd.insert(cmd.end(), opts.mpirunArgs.begin(), opts.mpirunArgs.end());
    cmd.insert(cmd.end(),
               {self, "--rank-wrapper", dir, "--", opts.loomRun, plan});
    cmd.insert(cmd.end(), opts.runArgs.begin(), opts.runArgs.end());
    cmd.push_back("--resume");
    say("start %lld: %lld rank(s), resuming from the newest checkpoint in %s "
        "if any",
        static_cast<long long>(attempt), static_cast<long long>(*n),
        opts.checkpointDir.c_str());

    bool resized = false;
    int status = runAttempt(cmd, *n, resized);
    if (stopRequest != 0) {
      say("stopped by signal %d; the ranks were stopped too",
          static_cast<int>(stopRequest));
      return 128 + stopRequest;
    }
    if (status == 0) {
      say("done on %lld rank(s) after %lld restart(s)",
          static_cast<long long>(*n), static_cast<long long>(restarts));
      return 0;
    }
    if (resized)
      continue;
    bool anyStarted = false;
    for (int64_t rank = 0; rank < *n; ++rank)
      anyStarted |= readRecord(dir, rank).has_value();
    if (!anyStarted)
      return fail(makeError("mpirun started no rank (exit status %d, its "
                            "output above); check --mpirun and --mpirun-arg",
                            status));
    std::vector<LostRank> lost = lostRanks(dir, *n);
    if (lost.empty()) {
      std::fprintf(stderr,
                   "loom-elastic: error: the ranks failed of their own "
                   "(mpirun exit status %d, the error above), no rank was "
                   "lost; not restarting\n",
                   status);
      return status > 0 && status < 128 ? status : 1;
    }
    for (const LostRank &l : lost) {
      std::string host = l.host;
      if (host.empty() && !used.empty()) {
        // Open MPI places ranks by slot: rank r is on the host that holds
        // the r-th slot.
        int64_t r = l.rank;
        for (const Host &h : used) {
          if (r < h.slots) {
            host = h.name;
            break;
          }
          r -= h.slots;
        }
      }
      say("rank %lld%s%s was lost: %s", static_cast<long long>(l.rank),
          host.empty() ? "" : " on ", host.c_str(), l.why.c_str());
      if (opts.hostfile.empty())
        ++lostHere;
      else
        ++lostOnHost[host];
    }
    if (++restarts > opts.maxRestarts)
      return fail(makeError("gave up after %lld restart(s) (--max-restarts "
                            "%lld)",
                            static_cast<long long>(restarts - 1),
                            static_cast<long long>(opts.maxRestarts)));
    double wait = std::min(
        60.0, opts.backoffSeconds * (1 << std::min<int64_t>(restarts - 1, 16)));
    say("restart %lld of at most %lld in %.1f s, planned for the devices "
        "left",
        static_cast<long long>(restarts),
        static_cast<long long>(opts.maxRestarts), wait);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    if (stopRequest != 0)
      return 128 + stopRequest;
  }
}

} // namespace

int elasticMain(int argc, char **argv) {
  if (argc >= 4 && std::strcmp(argv[1], "--rank-wrapper") == 0 &&
      std::strcmp(argv[3], "--") == 0 && argc >= 5) {
    std::vector<std::string> cmd(argv + 4, argv + argc);
    return runRankWrapper(argv[2], cmd);
  }
  StatusOr<ElasticOptions> opts = parseElasticOptions(argc, argv);
  if (!opts)
    return fail(opts.status());
  if (opts->help) {
    std::fputs(elasticHelpText(), stdout);
    return 0;
  }
  return Supervisor(std::move(*opts)).run();
}

} // namespace loom::runtime
