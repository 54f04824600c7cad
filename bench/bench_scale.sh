#!/usr/bin/env bash
# Rendezvous and mesh at scale: rendezvous_bench's connect + mesh exchange for 1024
# and 4096 simulated ranks (GATHER, what libhora does now, with the ranks in one event loop and
# then on a thread each, and the legacy 136-byte EXCHANGE for comparison), then a real job of NP
# ranks on this host (`horarun -np NP -H localhost:NP` of a program that calls hora::init(), one
# allreduce and hora::shutdown()) with its wall time, its result, and the peak of the ranks' and
# horarun's summed resident memory (sampled with ps every 0.2 s; shared library pages count once
# per process, so this overstates the real use).
#
#   bench/bench_scale.sh [NP]                          # run it (default NP 128)
#   source bench/bench_scale.sh; bench_scale [NP]      # from scripts/bench.sh
#
# Uses $BUILD_DIR (default build/): bench/rendezvous_bench, cli/horarun and
# test/integration/allreduce_once (ninja -C build bench/rendezvous_bench cli/horarun
# test/integration/allreduce_once). Targets: 1024 ranks in at most 0.5 s, 4096 in at most 2 s
# (connect + exchange); nothing is asserted, the table says what was measured.

# bench_scale [NP]: prints a heading and the tables.
bench_scale() (
  set -uo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1
  local build="${BUILD_DIR:-build}" np="${1:-128}"
  local bench="$build/bench/rendezvous_bench" horarun="$build/cli/horarun"
  local program="$build/test/integration/allreduce_once"
  local f
  for f in "$bench" "$horarun" "$program"; do
    [ -x "$f" ] || { echo "bench_scale: $f is not built (ninja -C $build ${f#"$build"/})"; return 0; }
  done

  echo "## rendezvous at scale: connect + mesh exchange (rendezvous_bench, 127.0.0.1, one process)"
  "$bench" 1024 4096
  echo
  echo "## the same with every simulated rank on its own thread with an rdv::Client"
  "$bench" --threads 1024 4096
  echo
  echo "## the same with the legacy exchange (one 136-byte slice per rank pair), 1024 ranks"
  "$bench" --legacy 1024
  echo

  echo "## a real job: horarun -np $np -H localhost:$np allreduce_once"
  local need=$((np * 6 + 128))
  [ "$(ulimit -n)" -ge "$need" ] || ulimit -n "$need" 2>/dev/null ||
    echo "(ulimit -n is $(ulimit -n); -np $np wants $need)"
  local work peak=0 used start end rc
  work=$(mktemp -d /tmp/bench_scale.XXXXXX)
  # KB resident in the job's processes (horarun and every allreduce_once).
  job_rss() { ps -C horarun,allreduce_once -o rss= | awk '{s+=$1} END{print s+0}'; }
  start=$(date +%s.%N)
  timeout -s KILL 600 "$horarun" --start-timeout 300 -np "$np" -H "localhost:$np" "$program" \
    >"$work/out" 2>"$work/err" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    used=$(job_rss)
    [ "$used" -gt "$peak" ] && peak=$used
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  end=$(date +%s.%N)
  printf '%6s %10s %8s %18s %18s  %s\n' "NP" "wall(s)" "exit" "peak RSS sum(MB)" "per rank(MB)" \
    "rank 0 says"
  printf '%6d %10.2f %8d %18d %18.1f  %s\n' "$np" "$(echo "$end - $start" | bc)" "$rc" \
    "$((peak / 1024))" "$(echo "$peak / 1024 / $np" | bc -l)" "$(sed -n 's/^\[0\]<stdout>://p' "$work/out" | head -1)"
  [ "$rc" -eq 0 ] || { echo "stderr:"; grep -v OMP_NUM_THREADS "$work/err" | head -5; }
  rm -rf "$work"
)

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  bench_scale "$@"
fi
