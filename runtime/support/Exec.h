//===- Exec.h - Replacing a forked child with a program ----------*- C++
//-*-===//

#ifndef LOOM_RUNTIME_SUPPORT_EXEC_H
#define LOOM_RUNTIME_SUPPORT_EXEC_H

#include <string>
#include <vector>

namespace loom::runtime {

/// In a forked child: runs `argv` (argv[0] found on PATH unless it has a
/// '/'), or prints "`who`: error: cannot run 'argv[0]': why" and exits 127.
[[noreturn]] void execOrExit(const std::vector<std::string> &argv,
                             const char *who);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_EXEC_H
