//===- loomc.cpp - The Loom compiler ----------------------------*- C++ -*-===//

#include "compiler/Loomc.h"

int main(int argc, char **argv) { return mlir::loom::loomcMain(argc, argv); }
