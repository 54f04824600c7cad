#!/usr/bin/env bash
# Remote launch latency: jobs running `true` over SSH on the test hosts (-np 4 on 2 hosts x 2
# slots, -np 8 on 8 hosts x 1, and that again through the fan-out tree), horarun vs Open MPI's
# mpirun of the same shape, median of 5 runs each, with the SSH exec channels (login shells) each
# host's sshd saw per job, and the floor: one bare `ssh HOST true` per host, all at once.
#
#   bench/remote_launch.sh                         # run it (needs root: network namespaces)
#   source bench/remote_launch.sh; bench_remote_launch   # from scripts/bench.sh
#
# Uses $BUILD_DIR/cli/horarun (default build/). Brings up its own test hosts
# (scripts/testhosts.sh up --index auto --hosts 8) and takes them down again, even on failure.
# Prints why and returns 0 when something it needs is missing.

# bench_remote_launch: prints a heading, then one "median  label" row per launcher.
bench_remote_launch() (
  set -uo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  local build="${BUILD_DIR:-build}" runs=5
  echo "== remote launch over SSH, running true: horarun vs mpirun side by side (median of $runs) =="
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "skipped: needs root and ip netns (test hosts are network namespaces)"
    return 0
  fi
  [ -x "$build/cli/horarun" ] || { echo "skipped: $build/cli/horarun is not built"; return 0; }
  local vars
  vars=$(scripts/testhosts.sh up --index auto --hosts 8 2>/dev/null) ||
    { echo "skipped: scripts/testhosts.sh up failed"; return 0; }
  eval "$vars"
  local index=$HORA_TESTHOSTS_INDEX config=$HORA_TESTHOSTS_SSH_CONFIG state=$HORA_TESTHOSTS_DIR
  trap 'scripts/testhosts.sh down --index '"$index"' >/dev/null 2>&1' EXIT

  # execs HOSTS...: SSH exec channels (each one runs the login shell) the hosts' sshds started.
  execs() {
    local h n=0
    for h in "$@"; do n=$((n + $(grep -c "Starting session: command" "$state/$h/sshd.log"))); done
    echo "$n"
  }
  # measure VAR HOSTS COMMAND...: runs COMMAND $runs times; sets VAR to "median execs-per-host"
  # or "FAILED"; HOSTS is a comma-separated list of the hosts used.
  measure() {
    local var=$1 hosts=$2; shift 2
    local times=() i t0 t1 out before after
    IFS=, read -r -a hl <<<"$hosts"
    before=$(execs "${hl[@]}")
    for ((i = 0; i < runs; i++)); do
      t0=$(date +%s.%N)
      if ! out=$(timeout 60 "$@" 2>&1); then
        printf -v "$var" 'FAILED'
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/            /' >&2
        return 0
      fi
      t1=$(date +%s.%N)
      times+=("$(echo "$t1 - $t0" | bc)")
    done
    after=$(execs "${hl[@]}")
    printf -v "$var" '%s %s' "$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")" \
      "$(echo "scale=1; ($after - $before) / ($runs * ${#hl[@]})" | bc)"
  }
  local have_mpi=1
  command -v mpirun >/dev/null 2>&1 || { have_mpi=0; echo "mpirun not installed (apt-get install openmpi-bin)"; }
  printf '%-42s %10s %10s %8s %14s %14s %10s\n' job horarun mpirun ratio "execs/host h" "execs/host m" \
    "ssh floor"
  local hosts hl_arg np hostlist
  # The third job is the second through the fan-out tree: horarun connects to h1 and h2, whose
  # agents connect to the other six (mpirun's row is its usual launch of the same shape).
  local job extra
  for job in "4 h1:2,h2:2" "8 h1,h2,h3,h4,h5,h6,h7,h8" "8 h1,h2,h3,h4,h5,h6,h7,h8 --ssh-fanout 2"; do
    read -r np hostlist extra <<<"$job"
    hosts=$(echo "$hostlist" | sed 's/:[0-9]*//g')
    local h m
    # shellcheck disable=SC2086 # $extra: horarun flags, word-split on purpose
    measure h "$hosts" "$build/cli/horarun" --ssh-config "$config" $extra -np "$np" -H "$hostlist" true
    m="- -"
    if [ $have_mpi = 1 ]; then
      # Open MPI starts its orted on each host with `ssh -F <alias file> h1 ...`; the orteds and
      # the launcher then connect over TCP on the test network.
      measure m "$hosts" mpirun --allow-run-as-root -np "$np" -H "$hostlist" \
        --mca plm_rsh_args "-F $config" --mca oob_tcp_if_include "198.18.$index.0/24" \
        --mca btl_tcp_if_include "198.18.$index.0/24" true
    fi
    # The floor under any launcher that logs in over SSH: one bare `ssh HOST true` per host, all
    # at once (OpenSSH, which runs the same login shell; no job at all).
    local f
    measure f "$hosts" bash -c 'for h in ${2//,/ }; do ssh -F "$1" "$h" true & done; wait' _ \
      "$config" "$hosts"
    local ratio=-
    if [[ $h != FAILED && $m != FAILED && $m != "- -" ]]; then
      ratio=$(echo "scale=2; ${h%% *} / ${m%% *}" | bc)
    fi
    local label="-np $np -H ${hostlist/h1,h2,h3,h4,h5,h6,h7,h8/h1,...,h8}${extra:+ $extra}"
    printf '%-42s %9.3fs %9.3fs %7sx %14s %14s %9.3fs\n' "$label" "${h%% *}" "${m%% *}" "$ratio" \
      "${h#* }" "${m#* }" "${f%% *}"
  done
  echo "(ratio = horarun time / mpirun time; execs/host = SSH exec channels, i.e. login shells, per host per job;"
  echo " ssh floor = one bare \`ssh HOST true\` per host of the job, all at once: what any SSH launcher pays)"
)

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  bench_remote_launch
fi
