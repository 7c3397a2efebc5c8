//===- Forward.cpp - loom-run --forward ---------------------------*- C++ -*-===//
//
// loom-run never links MLIR, so a forward pass compiles the model by running
// `loomc --forward-only` as a child process, then executes the plan on one
// rank and writes each graph output as DIR/<name>.npy.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/Driver.h"

#include "runtime/Session.h"
#include "runtime/data/Npy.h"
#include "runtime/support/Exec.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <ftw.h>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace loom::runtime {

namespace {

StatusOr<std::string> findLoomc() {
  if (const char *env = std::getenv("LOOMC")) {
    if (access(env, X_OK) != 0)
      return makeError("$LOOMC='%s' is not an executable: %s", env,
                       std::strerror(errno));
    return std::string(env);
  }
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len > 0) {
    self[len] = '\0';
    std::string dir(self);
    dir = dir.substr(0, dir.find_last_of('/'));
    std::string candidate = dir + "/loomc";
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
    return makeError("cannot find loomc next to loom-run (%s); build it or "
                     "set LOOMC=/path/to/loomc",
                     candidate.c_str());
  }
  return makeError("cannot locate loom-run's own folder; set "
                   "LOOMC=/path/to/loomc");
}

/// Runs `argv`, capturing its stdout and stderr; returns its exit code (or
/// 128 + signal).
StatusOr<int> runChild(const std::vector<std::string> &args,
                       std::string &output) {
  int fds[2];
  if (pipe(fds) != 0)
    return makeError("pipe failed: %s", std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0)
    return makeError("fork failed: %s", std::strerror(errno));
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execOrExit(args, "loom-run");
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) != 0) {
    if (n < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    output.append(buf, n);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return makeError("waitpid failed: %s", std::strerror(errno));
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Status makeDirs(const std::string &dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty())
      continue;
    if (mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST)
      return makeError("cannot create folder '%s': %s", partial.c_str(),
                       std::strerror(errno));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return makeError("'%s' is not a folder", dir.c_str());
  return Status::ok();
}

int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  return remove(path);
}

std::string shapeArg(const std::vector<int64_t> &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

Status forward(const RunOptions &opts, const std::string &tmpDir) {
  std::map<std::string, HostTensor> inputs;
  for (const auto &[name, file] : opts.data) {
    LOOM_ASSIGN_OR_RETURN(HostTensor t, readNpy(file));
    inputs[name] = std::move(t);
  }
  LOOM_ASSIGN_OR_RETURN(std::string loomc, findLoomc());
  std::string planPath = tmpDir + "/forward.loomplan";
  std::vector<std::string> args = {loomc, opts.planPath, "--forward-only"};
  for (const auto &[name, t] : inputs) {
    args.push_back("--input-shape");
    args.push_back(name + "=" + shapeArg(t.shape));
  }
  if (!opts.precision.empty()) {
    args.push_back("--precision");
    args.push_back(opts.precision);
  }
  args.push_back("-o");
  args.push_back(planPath);
  std::string output;
  LOOM_ASSIGN_OR_RETURN(int code, runChild(args, output));
  if (code != 0) {
    // Report loomc's own diagnostic in our one error line: its first line
    // that says `error:`, without its location prefix.
    std::string why = "exit code " + std::to_string(code);
    size_t at = output.find("error: ");
    if (at != std::string::npos) {
      size_t end = output.find('\n', at);
      why = output.substr(at + 7, end == std::string::npos ? std::string::npos
                                                           : end - at - 7);
    }
    return makeError("cannot compile '%s' for --forward: %s",
                     opts.planPath.c_str(), why.c_str());
  }

  LOOM_ASSIGN_OR_RETURN(plan::Plan plan, loadPlan(planPath));
  if (plan.is_training() || plan.world_size() != 1)
    return makeError("%s: loomc --forward-only produced a %s plan for %d "
                     "rank(s); expected a forward plan for 1 rank",
                     planPath.c_str(),
                     plan.is_training() ? "training" : "forward",
                     plan.world_size());
  std::set<std::string> expected;
  for (const plan::Buffer &b : plan.programs(0).buffers())
    if (b.role() == plan::INPUT) {
      expected.insert(b.binding());
      auto it = inputs.find(b.binding());
      if (it == inputs.end())
        return makeError("no value for graph input '%s'; pass --input "
                         "%s=FILE.npy",
                         b.binding().c_str(), b.binding().c_str());
      if (it->second.shape != bufferShape(b))
        return makeError("--input %s has shape %s but the plan expects %s",
                         b.binding().c_str(),
                         shapeToString(it->second.shape).c_str(),
                         shapeToString(bufferShape(b)).c_str());
    }
  for (const auto &kv : inputs)
    if (!expected.count(kv.first))
      return makeError("--input '%s' is not a graph input of '%s'",
                       kv.first.c_str(), opts.planPath.c_str());

  LocalCommunicator world;
  LOOM_ASSIGN_OR_RETURN(auto session,
                        Session::create(std::move(plan), world, planPath));
  for (const auto &[name, t] : inputs)
    LOOM_RETURN_IF_ERROR(session->setInput(name, t));
  LOOM_RETURN_IF_ERROR(session->runStep(0));

  LOOM_RETURN_IF_ERROR(makeDirs(opts.outputDir));
  for (auto &[name, t] : session->outputs()) {
    if (t.type == ElemType::BF16) // .npy has no bfloat16: its exact float32
      t = convertElements(t, ElemType::F32);
    std::string file = name;
    for (char &c : file)
      if (c == '/')
        c = '_';
    LOOM_RETURN_IF_ERROR(writeNpy(opts.outputDir + "/" + file + ".npy", t));
  }
  return Status::ok();
}

} // namespace

int runForward(const RunOptions &opts) {
  char tmpl[] = "/tmp/loom-run-XXXXXX";
  if (!mkdtemp(tmpl)) {
    printError(std::string("cannot create a temporary folder: ") +
               std::strerror(errno));
    return 1;
  }
  Status s = forward(opts, tmpl);
  nftw(tmpl, removeEntry, 16, FTW_DEPTH | FTW_PHYS);
  if (!s.isOk()) {
    printError(s.message());
    return 1;
  }
  return 0;
}

} // namespace loom::runtime
