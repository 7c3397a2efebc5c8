#!/usr/bin/env bash
# The compiler links the plan format library, not the runtime: the binary
# given (loomc) must not load OpenMP (libgomp, libomp, libiomp), MPI or BLAS,
# directly or through another library — except the BLAS that LAPACK loads
# for the ILP solver (CBC's CoinUtils links LAPACK; Debian's LAPACK may be
# OpenBLAS's). Run it on loom-run to see it fail.
# usage: loomc_links_test.sh BINARY
set -u
BIN=${1:?usage: loomc_links_test.sh BINARY}
[ -x "$BIN" ] || { echo "FAIL: '$BIN' is not an executable"; exit 1; }
libs=$(ldd "$BIN") || { echo "FAIL: ldd '$BIN' failed"; exit 1; }
bad=$(grep -Ei 'libgomp|lib(i)?omp[0-9]*\.|libmpi' <<<"$libs")
blas=$(grep -Ei 'lib(open)?blas' <<<"$libs")
if [ -n "$blas" ]; then
  lapack=$(awk '/liblapack\.so/ {print $3}' <<<"$libs")
  solver_blas=""
  [ -n "$lapack" ] && solver_blas=$(ldd "$lapack" | grep -Ei 'lib(open)?blas')
  while read -r line; do
    name=$(awk '{print $1}' <<<"$line")
    grep -qF "$name" <<<"$solver_blas" || bad+=$'\n'"$line"
  done <<<"$blas"
fi
bad=$(sed '/^$/d' <<<"$bad")
if [ -n "$bad" ]; then
  echo "FAIL: $(basename "$BIN") links what only the runtime may:"
  echo "$bad"
  exit 1
fi
echo "ok: $(basename "$BIN") links no OpenMP or MPI, and BLAS only through the solver's LAPACK"
