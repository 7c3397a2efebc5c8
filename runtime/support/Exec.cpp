//===- Exec.cpp - Replacing a forked child with a program -----------------===//

#include "runtime/support/Exec.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace loom::runtime {

void execOrExit(const std::vector<std::string> &argv, const char *who) {
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  if (!argv.empty())
    execvp(args[0], args.data());
  std::fprintf(stderr, "%s: error: cannot run '%s': %s\n", who,
               argv.empty() ? "" : args[0], std::strerror(errno));
  _exit(127);
}

} // namespace loom::runtime
