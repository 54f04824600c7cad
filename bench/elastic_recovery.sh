#!/usr/bin/env bash
# Recovery time: an elastic reset against a full restart of the same job. On 2 test hosts x 2
# ranks, examples/elastic_train runs; once it is at step 15, one worker process on h2 is
# SIGKILLed (h2 itself stays up). Measured: from the kill to the first step rank 0 prints
# afterwards at the new size (elastic: the new round, 2 ranks on h1, h2 blacklisted) or of the
# new attempt (horarun -H h1:2,h2:2 --max-restarts 1: every rank stopped and the whole job
# started again at 4 ranks, what torchrun does). Rank 0's lines are timestamped as horarun
# writes them (bash's EPOCHREALTIME, no process per line). The two alternate, $RUNS times each
# (default 5); the table prints their medians and the ratio restart / elastic.
#
#   bench/elastic_recovery.sh                              # run it (needs root: network namespaces)
#   source bench/elastic_recovery.sh; bench_elastic_recovery   # from scripts/bench.sh
#
# Uses $BUILD_DIR/cli/horarun and $BUILD_DIR/examples/elastic_train (default build/). Brings up
# its own test hosts (scripts/testhosts.sh up --index auto --hosts 2) and takes them down again,
# even on failure. Prints why and returns 0 when something it needs is missing.

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# bench_elastic_recovery: prints a heading, one row per mode, and the ratio.
# shellcheck disable=SC2317 # its helpers are called by the trap and through bench_wait_until
bench_elastic_recovery() (
  # Not -e (scripts/bench.sh sets it): a failed run is a FAILED cell, and the table goes on.
  set +e -uo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 0
  local root=$PWD build="${BUILD_DIR:-build}" runs="${RUNS:-5}" step_ms=40
  echo "== elastic recovery: one worker of 2 hosts x 2 SIGKILLed; kill -> first step after, elastic reset vs full restart (median of $runs) =="
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "skipped: needs root and ip netns (test hosts are network namespaces)"
    return 0
  fi
  local horarun=$root/$build/cli/horarun train=$root/$build/examples/elastic_train
  [ -x "$horarun" ] || { echo "skipped: $build/cli/horarun is not built"; return 0; }
  [ -x "$train" ] || { echo "skipped: $build/examples/elastic_train is not built"; return 0; }
  local work index="" pid=""
  work=$(mktemp -d /tmp/elastic_recovery.XXXXXX)
  trap bench_cleanup EXIT
  local config=""
  bench_hosts_up 2 || return 0
  printf '#!/bin/sh\necho h1:2\necho h2:2\n' >"$work/discover.sh"
  chmod +x "$work/discover.sh"

  # pids_on HOST COMM: processes named COMM in HOST's namespace.
  pids_on() {
    local p
    for p in $(ip netns pids "hora$index-$1" 2>/dev/null); do
      [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$2" ] && echo "$p"
    done
  }
  # first_after T PATTERN: the timestamp of the first line of ./out after T matching PATTERN.
  first_after() { bench_nth_after 1 "$1" "$2" "$work/out"; }
  # A PyTorch program's start, for the second pair of rows: elastic_train after a real
  # `import torch` (what every start of a PyTorch script pays before its first step).
  printf '#!/bin/sh\n/usr/bin/python3 -c "import torch" || exit 1\nexec %s "$@"\n' "$train" \
    >"$work/torch_start.sh"
  chmod +x "$work/torch_start.sh"

  # one MODE PROGRAM: one run; prints the seconds from the kill to the first step after it, or
  # FAILED.
  one() {
    local mode=$1 program=$2 t_kill t_step victim
    local -a flags
    if [ "$mode" = elastic ]; then
      flags=(--host-discovery-script "$work/discover.sh" -np 4 --min-np 2)
    else
      flags=(-H "h1:2,h2:2" -np 4 --max-restarts 1)
    fi
    : >"$work/out"
    "$horarun" --ssh-config "$config" "${flags[@]}" "$program" --steps 5000 --step-ms "$step_ms" \
      > >(bench_stamp >"$work/out") 2>"$work/err.$mode" </dev/null &
    pid=$!
    if ! bench_wait_until 120 first_after 0 "step 15 size 4\$" >/dev/null; then
      echo "FAILED (no step 15: $(tail -2 "$work/err.$mode" | tr '\n' ' '))"
      kill -KILL "$pid" 2>/dev/null
      pid=""
      return 0
    fi
    victim=$(pids_on h2 elastic_train | head -1)
    t_kill=$EPOCHREALTIME
    kill -KILL "$victim"
    # Elastic: the first step of the new round (size 2). Restart: step 1 of the new attempt.
    local want="step [0-9]+ size 2\$"
    [ "$mode" = restart ] && want="step 1 size 4\$"
    if t_step=$(bench_wait_until 60 first_after "$t_kill" "$want"); then
      awk -v a="$t_kill" -v b="$t_step" 'BEGIN { printf "%.3f\n", b - a }'
    else
      echo "FAILED (no '$want' after the kill: $(tail -2 "$work/err.$mode" | tr '\n' ' '))"
    fi
    kill -TERM "$pid" 2>/dev/null
    local end=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=""
    # Nothing of this run left on the hosts before the next one starts.
    end=$((SECONDS + 15))
    while [ -n "$(pids_on h1 elastic_train)$(pids_on h2 elastic_train)" ] && [ $SECONDS -lt $end ]; do
      sleep 0.05
    done
  }

  # pair LABEL PROGRAM: $runs runs of each mode, alternating; prints two rows and the ratio.
  pair() {
    local label=$1 program=$2 i t e=() r=()
    for ((i = 0; i < runs; i++)); do
      t=$(one elastic "$program")
      e+=("$t")
      t=$(one restart "$program")
      r+=("$t")
    done
    awk -v e="${e[*]}" -v r="${r[*]}" -v label="$label" "$(cat bench/median.awk)"'
      function row(what, list,   m) {
        m = median(list)
        printf "%-48s %10.3f   %s\n", label ", " what, m, list
        return m
      }
      BEGIN {
        if (e ~ /FAILED/ || r ~ /FAILED/) {
          printf "%s: elastic: %s\n%s: restart: %s\n", label, e, label, r
          exit
        }
        me = row("elastic reset", e)
        mr = row("full restart", r)
        printf "%-48s %9.2fx\n", label ", restart / elastic", mr / me
      }'
  }

  printf '%-48s %10s   %s\n' "program, recovery (kill -> first step after)" "median (s)" "runs (s)"
  pair "C++ elastic_train" "$train"
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    pair "import torch + elastic_train" "$work/torch_start.sh"
  else
    echo "(the PyTorch-start rows are skipped: /usr/bin/python3 has no torch)"
  fi
  echo "(2 test hosts x 2 ranks, --step-ms $step_ms. elastic reset: --min-np 2, h2 blacklisted, 4 -> 2 ranks;"
  echo " full restart: -H h1:2,h2:2 --max-restarts 1, 4 -> 4 ranks. 'import torch +': each worker"
  echo " process imports torch before elastic_train starts, as a PyTorch script does at every start."
  echo " kill = SIGKILL of one worker process on h2, h2 stays up; after = the first step rank 0 prints"
  echo " at the new size (elastic: new round on h1, h2 blacklisted) or of the new attempt (restart:"
  echo " step 1 again, the steps done are lost). The restart keeps horarun's agents: no SSH login, no"
  echo " preflight (torchrun keeps its agents too); it pays stopping every rank, starting 4 new"
  echo " processes, a new rendezvous and init. The elastic reset plans the next round once the"
  echo " lost host's other workers have exited (at most 300 ms later: cli/elastic's reset settle).)"
  echo "last elastic run:  $(grep -m1 "elastic: round 1:" "$work/err.elastic" | sed 's/^horarun: //')"
  echo "                   $(grep -m1 "elastic: round 1 formed" "$work/err.elastic" | sed 's/^horarun: //')"
  echo "last restart run:  $(grep -m1 "restarting the job" "$work/err.restart" | sed 's/^horarun: //')"
)

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  bench_elastic_recovery
fi
