//===- main.cpp - loom-elastic --------------------------------------------===//
//
// Supervises an elastic training job; the logic lives in runtime/elastic so
// it can be tested without a process.
//
//===----------------------------------------------------------------------===//

#include "runtime/elastic/Supervisor.h"

int main(int argc, char **argv) {
  return loom::runtime::elasticMain(argc, argv);
}
