#!/usr/bin/env bash
# Horovod's own elastic example under Horovod's launcher and under horarun, side by side: real
# Horovod 0.28.1 (../shared/horovod's archive) runs Horovod v0.28.1's
# pytorch_synthetic_benchmark_elastic.py, one of its elastic PyTorch examples, read from
# HOROVOD_SRC (a Horovod checkout, or a git mirror whose HOROVOD_REF, default v0.28.1, is
# exported; nothing of Horovod's enters this repository), on 2 test hosts x 1 worker with a host discovery script:
#   1. h1 and h2 listed: the job trains at size 2;
#   2. shrink: at iteration 5 the worker on h2 is SIGKILLed and h2 leaves the listing;
#   3. grow: once rank 0 trains again, h2 is listed again; the job grows back to size 2 (both
#      launchers blacklist a host whose worker failed: --blacklist-cooldown-range 1 2 lets h2
#      come back);
#   the example runs to its last iteration and prints "Total img/sec on N CPU(s)".
# Per launcher, median of $RUNS (default 3) interleaved runs:
#   shrink  the kill -> rank 0's first iteration line after it (training resumed at size 1);
#   grow    h2 listed again -> rank 0's first iteration line after the reset's pause (the first
#           gap between two iteration lines over 3 s and over 2.5x the median gap before);
#   total   the whole job's wall time;
#   result  exit code and the example's last line (its size at the end: 2 CPUs for both).
#
#   bench/horovod_elastic.sh [HOROVOD_SRC]                # run it (needs root: network namespaces)
#   source bench/horovod_elastic.sh; bench_horovod_elastic   # from scripts/bench.sh
#
# horovodrun runs inside h1's namespace (the hosts' names resolve there) with an `ssh` that reads
# the test hosts' ssh_config; horarun runs here with --ssh-config and --horovod-elastic. Both get
# OMP_NUM_THREADS=1 (the hosts are namespaces sharing this machine's cores). Uses
# $BUILD_DIR/cli/horarun (default build/). Brings up its own test hosts and takes them down,
# even on failure. Prints why and returns 0 when something it needs is missing.

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck disable=SC2317 # its helpers are called by the trap and through bench_wait_until
bench_horovod_elastic() (
  set +e -uo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 0
  local root=$PWD build="${BUILD_DIR:-build}" runs="${RUNS:-3}"
  local src=${1:-${HOROVOD_SRC:-$root/../.mirror/horovod+horovod/repo}}
  local archive=${HOROVOD_ARCHIVE:-$root/../shared/horovod/horovod-0.28.1-torch1.13-cpu-gloo.tar.xz}
  local example=examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py  # check_paths: ignore
  echo "== horovod_elastic: Horovod's pytorch_synthetic_benchmark_elastic.py, real Horovod 0.28.1, 2 test hosts x 1: horovodrun vs horarun --horovod-elastic (median of $runs) =="
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "skipped: needs root and ip netns (test hosts are network namespaces)"
    return 0
  fi
  local horarun=$root/$build/cli/horarun
  [ -x "$horarun" ] || { echo "skipped: $build/cli/horarun is not built"; return 0; }
  [ -r "$archive" ] || { echo "skipped: no Horovod archive at $archive"; return 0; }
  [ -e "$src" ] || { echo "skipped: no Horovod sources at $src (give HOROVOD_SRC)"; return 0; }
  /usr/bin/python3 -c 'import torchvision' 2>/dev/null ||
    { echo "skipped: /usr/bin/python3 has no torchvision (the example's models)"; return 0; }
  local work index="" pid=""
  work=$(mktemp -d /tmp/horovod_elastic.XXXXXX)
  trap bench_cleanup EXIT
  if [ -f "$src/$example" ]; then
    cp "$src/$example" "$work/example.py"
  else
    git -C "$src" show "${HOROVOD_REF:-v0.28.1}:$example" >"$work/example.py" 2>/dev/null ||
      { echo "skipped: $src has no $example"; return 0; }
  fi
  tar -xJf "$archive" -C "$work" || { echo "skipped: cannot unpack $archive"; return 0; }
  local config=""
  bench_hosts_up 2 || return 0
  mkdir -p "$work/sshwrap"
  printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$config" >"$work/sshwrap/ssh"
  chmod +x "$work/sshwrap/ssh"
  printf '#!/bin/sh\ncat %s\n' "$work/hosts" >"$work/discover.sh"
  chmod +x "$work/discover.sh"
  listing() { printf '%s\n' "$@" >"$work/hosts.new" && mv "$work/hosts.new" "$work/hosts"; }

  pids_on() {  # HOST: the example's Python processes in HOST's namespace (not the shells)
    local p
    for p in $(ip netns pids "hora$index-$1" 2>/dev/null); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = python3 ] &&
        grep -q example.py "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done
  }
  # first_after T, third_after T: the stamp of rank 0's first (third) iteration line after T;
  # iter_line K: of its line for iteration K.
  first_after() { bench_nth_after 1 "$1" "Iter #[0-9]+:" "$work/out"; }
  third_after() { bench_nth_after 3 "$1" "Iter #[0-9]+:" "$work/out"; }
  iter_line() { bench_nth_after 1 0 "Iter #$1:" "$work/out"; }

  # one LAUNCHER: one run; prints "shrink grow total rc last-line" (a FAILED field on failure).
  one() {
    local launcher=$1 t0 t_kill t_shrink t_grow_at t_grow victim
    local -a cmd
    listing h1:1 h2:1
    : >"$work/out"
    local -a args=(/usr/bin/python3 "$work/example.py" --no-cuda --model mobilenet_v3_small
      --batch-size 4 --num-warmup-batches 2 --num-batches-per-iter 5 --num-iters 30)
    if [ "$launcher" = horovodrun ]; then
      # (--network-interfaces skips its NIC discovery, whose remote task lacks PYTHONPATH)
      cmd=(ip netns exec "hora$index-h1" env "PATH=$work/sshwrap:$PATH"
        /usr/bin/python3 "$work/site/bin/horovodrun" --gloo --network-interfaces eth0
        -np 2 --min-np 1 --max-np 2 --host-discovery-script "$work/discover.sh"
        --blacklist-cooldown-range 1 2)
    else
      cmd=("$horarun" --ssh-config "$config" --horovod-elastic -x OMP_NUM_THREADS
        -np 2 --min-np 1 --max-np 2 --host-discovery-script "$work/discover.sh"
        --blacklist-cooldown-range 1 2)
    fi
    t0=$EPOCHREALTIME
    OMP_NUM_THREADS=1 PYTHONPATH=$work/site timeout 600 "${cmd[@]}" "${args[@]}" \
      > >(bench_stamp >"$work/out") 2>"$work/err.$launcher" </dev/null &
    pid=$!
    if ! bench_wait_until 240 iter_line 5 >/dev/null; then
      echo "FAILED(no-iteration-5) - - - $(tail -1 "$work/err.$launcher" | tr ' ' '_')"
      kill -KILL "$pid" 2>/dev/null
      pid=""
      return 0
    fi
    victim=$(pids_on h2 | head -1)
    listing h1:1
    t_kill=$EPOCHREALTIME
    kill -KILL "$victim" 2>/dev/null
    t_shrink=$(bench_wait_until 120 first_after "$t_kill") || t_shrink=""
    # Three iterations alone (their pace is what the grow's pause is told from), then h2 again.
    [ -n "$t_shrink" ] && bench_wait_until 60 third_after "$t_shrink" >/dev/null
    listing h1:1 h2:1
    t_grow_at=$EPOCHREALTIME
    wait "$pid"
    local rc=$?
    pid=""
    local t_end=$EPOCHREALTIME
    # The reset's pause: the first gap after t_grow_at over 2 s and over 2.5x the median gap of
    # the iterations rank 0 did alone (between the shrink and the new listing).
    t_grow=$(awk -v s="$t_shrink" -v g="$t_grow_at" "$(cat bench/median.awk)"'
      /Iter #[0-9]+:/ {
        if ($1 >= s && $1 <= g) { if (p != "") gaps = gaps " " ($1 - p); p = $1 }
        if ($1 <= g) { q = $1; next }
        if (lim == "") { lim = 2.5 * (gaps == "" ? 1 : median(gaps)); if (lim < 2) lim = 2 }
        if (q != "" && $1 - q > lim) { print $1; exit }
        q = $1
      }' "$work/out")
    local last
    last=$(grep -oE "Total img/sec on [0-9]+ CPU\(s\)" "$work/out" | tail -1 | tr ' ' '_')
    awk -v k="$t_kill" -v s="$t_shrink" -v g="$t_grow_at" -v w="$t_grow" -v a="$t0" -v e="$t_end" \
      -v rc="$rc" -v last="${last:-no_result_line}" 'BEGIN {
        printf "%s %s %.1f %d %s\n", (s == "" ? "FAILED" : sprintf("%.2f", s - k)),
          (w == "" ? "FAILED" : sprintf("%.2f", w - g)), e - a, rc, last }'
    # Nothing of this run is left on the hosts before the next one starts.
    local end=$((SECONDS + 20))
    while [ -n "$(pids_on h1)$(pids_on h2)" ] && [ $SECONDS -lt $end ]; do sleep 0.1; done
  }

  local i l results=$work/results
  for ((i = 0; i < runs; i++)); do
    for l in horovodrun horarun; do
      echo "$l $(one "$l")" >>"$results"
    done
  done
  printf '%-11s %12s %12s %11s   %s\n' launcher "shrink (s)" "grow (s)" "total (s)" "exit, result (every run)"
  awk "$(cat bench/median.awk)"'
    { s[$1] = s[$1] " " $2; g[$1] = g[$1] " " $3; t[$1] = t[$1] " " $4; r[$1] = r[$1] " " $5 "," $6 }
    END {
      for (l in s) {
        printf "%-11s %12s %12s %11s  %s\n", l, fmt(s[l]), fmt(g[l]), fmt(t[l]), r[l]
        ms[l] = median(s[l]); mg[l] = median(g[l]); mt[l] = median(t[l])
      }
      if (("horovodrun" in ms) && ("horarun" in ms) && ms["horovodrun"] > 0 && mg["horovodrun"] > 0) {
        printf "%-11s %11.2fx %11.2fx %10.2fx\n", "horarun / horovodrun", ms["horarun"] / ms["horovodrun"],
          mg["horarun"] / mg["horovodrun"], mt["horarun"] / mt["horovodrun"]
      }
    }
    function fmt(list) { return (list ~ /FAILED/) ? "FAILED" : sprintf("%.2f", median(list)) }' "$results"
  echo "(each run: 2 test hosts x 1 worker, Horovod's synthetic benchmark with mobilenet_v3_small,"
  echo " batch 4, 30 iterations of 5 batches, a commit every batch. At iteration 5 the worker on h2"
  echo " is SIGKILLed and h2 leaves the listing (shrink to 1); once rank 0 trains again h2 is listed"
  echo " again (grow to 2). Times from rank 0's lines, stamped as they arrive here.)"
  echo "last horovodrun run: $(grep -m1 -iE "error|blacklist" "$work/err.horovodrun" | cut -c1-160)"
  echo "last horarun run:    $(grep -m1 "elastic: round 1" "$work/err.horarun" | sed 's/^horarun: //')"
)

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  bench_horovod_elastic "$@"
fi
