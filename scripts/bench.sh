#!/usr/bin/env bash
# hora's benchmarks, each printed under a heading. Installs what is missing and builds first.
#
#   scripts/bench.sh                      # every benchmark
#   scripts/bench.sh collectives          # one of them (names: see usage below)
#   scripts/bench.sh collectives -e 1M    # arguments after the name go to that benchmark
#   BUILD_DIR=build-foo scripts/bench.sh  # another build directory (default: build)
#   NO_BUILD=1 scripts/bench.sh           # skip set-up and build (the binaries exist already)
#
# Adding a benchmark: write a function bench_<name> that prints a heading and its results, add
# <name> to BENCHMARKS, and describe it in usage(). Ranks are started with build/cli/horarun.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build}"
BENCHMARKS=(collectives)

usage() {
  cat <<EOF
usage: scripts/bench.sh [all | NAME [ARGS...]]

  collectives   allreduce_bench (nccl-tests table: allreduce, allgather, broadcast, alltoall,
                reducescatter; float32 sum) at -np 2 and -np 4 on localhost, 4 B to 64 MiB.
                ARGS go to allreduce_bench, e.g. --collective allreduce -e 1M
  all           every benchmark above, with default arguments (the default)

Environment: BUILD_DIR (default build); NO_BUILD=1 skips set-up and build.
EOF
}

heading() {
  printf '\n==== %s ====\n\n' "$*"
}

build() {
  if [ -n "${NO_BUILD:-}" ]; then return 0; fi
  bash scripts/build.sh "$BUILD_DIR" >/dev/null
}

# Rank 0 prints the table; dropping horarun's "[0]<stdout>:" prefix keeps its columns readable.
# Anything on stderr keeps its prefix, so it still says which rank it came from.
run_ranks() {
  local np="$1"
  shift
  "$BUILD_DIR/cli/horarun" -np "$np" -H "localhost:$np" "$@" | sed -u 's/^\[0\]<stdout>://'
}

bench_collectives() {
  local np
  for np in 2 4; do
    heading "Collectives: allreduce_bench, -np $np -H localhost:$np, 4 B to 64 MiB"
    run_ranks "$np" "$BUILD_DIR/examples/allreduce_bench" -b 4 -e 64M -f 2 "$@"
  done
}

name="${1:-all}"
shift || true
case "$name" in
  -h | --help)
    usage
    ;;
  all)
    build
    for b in "${BENCHMARKS[@]}"; do "bench_$b"; done
    ;;
  collectives)
    build
    "bench_$name" "$@"
    ;;
  *)
    echo "scripts/bench.sh: unknown benchmark '$name'" >&2
    usage >&2
    exit 2
    ;;
esac
