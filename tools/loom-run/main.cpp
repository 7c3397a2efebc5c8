//===- main.cpp - loom-run ------------------------------------------------===//
//
// Runs Loom plans; the logic lives in runtime/driver so it can be tested
// without a process.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/Driver.h"

int main(int argc, char **argv) { return loom::runtime::runMain(argc, argv); }
