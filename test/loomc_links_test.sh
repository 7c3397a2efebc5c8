#!/usr/bin/env bash
# The compiler links the plan format library, not the runtime: the binary
# given (loomc) must not load OpenBLAS, OpenMP (libgomp, libomp, libiomp) or
# MPI, directly or through another library. Run it on loom-run to see it
# fail.
# usage: loomc_links_test.sh BINARY
set -u
BIN=${1:?usage: loomc_links_test.sh BINARY}
[ -x "$BIN" ] || { echo "FAIL: '$BIN' is not an executable"; exit 1; }
libs=$(ldd "$BIN") || { echo "FAIL: ldd '$BIN' failed"; exit 1; }
bad=$(grep -Ei 'lib(open)?blas|libgomp|lib(i)?omp[0-9]*\.|libmpi' <<<"$libs")
if [ -n "$bad" ]; then
  echo "FAIL: $(basename "$BIN") links what only the runtime may:"
  echo "$bad"
  exit 1
fi
echo "ok: $(basename "$BIN") links no BLAS, OpenMP or MPI"
