#!/usr/bin/env bash
# Remote launch latency: a job of 4 ranks running `true` on 2 test hosts x 2 slots over SSH,
# horarun vs Open MPI's mpirun of the same shape, median of 5 runs each.
#
#   bench/remote_launch.sh                         # run it (needs root: network namespaces)
#   source bench/remote_launch.sh; bench_remote_launch   # from scripts/bench.sh
#
# Uses $BUILD_DIR/cli/horarun (default build/). Brings up its own test hosts
# (scripts/testhosts.sh up --index auto --hosts 2) and takes them down again, even on failure.
# Prints why and returns 0 when something it needs is missing.

# bench_remote_launch: prints a heading, then one "median  label" row per launcher.
bench_remote_launch() (
  set -uo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  local build="${BUILD_DIR:-build}" runs=5
  echo "== remote launch: -np 4 on 2 test hosts x 2 slots over SSH, running true (median of $runs) =="
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "skipped: needs root and ip netns (test hosts are network namespaces)"
    return 0
  fi
  [ -x "$build/cli/horarun" ] || { echo "skipped: $build/cli/horarun is not built"; return 0; }
  local vars
  vars=$(scripts/testhosts.sh up --index auto --hosts 2 2>/dev/null) ||
    { echo "skipped: scripts/testhosts.sh up failed"; return 0; }
  eval "$vars"
  local index=$HORA_TESTHOSTS_INDEX config=$HORA_TESTHOSTS_SSH_CONFIG
  trap 'scripts/testhosts.sh down --index '"$index"' >/dev/null 2>&1' EXIT

  # row LABEL COMMAND...: runs COMMAND $runs times and prints the median wall time; a failing
  # run prints its output and the row says FAILED.
  row() {
    local label=$1; shift
    local times=() i t0 t1 out
    for ((i = 0; i < runs; i++)); do
      t0=$(date +%s.%N)
      if ! out=$(timeout 60 "$@" 2>&1); then
        printf '%10s  %s\n' FAILED "$label"
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/            /'
        return 0
      fi
      t1=$(date +%s.%N)
      times+=("$(echo "$t1 - $t0" | bc)")
    done
    printf '%9.3fs  %s\n' "$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")" "$label"
  }

  row "horarun -np 4 -H h1:2,h2:2 true" \
    "$build/cli/horarun" --ssh-config "$config" -np 4 -H h1:2,h2:2 true
  if command -v mpirun >/dev/null 2>&1; then
    # Open MPI starts its orted on each host with `ssh -F <alias file> h1 ...`; the orteds and the
    # launcher then connect over TCP on the test network (the btl/oob on 198.18.x).
    row "mpirun -np 4 -H h1:2,h2:2 true (ssh -F alias file)" \
      mpirun --allow-run-as-root -np 4 -H h1:2,h2:2 \
        --mca plm_rsh_args "-F $config" --mca oob_tcp_if_include "198.18.$index.0/24" \
        --mca btl_tcp_if_include "198.18.$index.0/24" true
  else
    echo "mpirun not installed (apt-get install openmpi-bin to compare with Open MPI)"
  fi
)

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  bench_remote_launch
fi
