#!/usr/bin/env bash
# Network discovery time: how long horarun's interface discovery (listen/connect probes between
# every pair of hosts) takes on N test hosts with two candidate interfaces each, and the
# wall time of the whole job (`true` on one rank per host), median of 3 runs per row.
#
#   bench/discovery.sh [N...]                        # run it (needs root: network namespaces)
#   source bench/discovery.sh; bench_discovery [N...]   # from scripts/bench.sh
#
# N are the host counts (default 2 4 8, each 2..32). Uses $BUILD_DIR/cli/horarun (default build/).
# Brings up ONE set of test hosts for the largest N (scripts/testhosts.sh up --index auto
# --hosts MAX --second-network) and takes it down again, even on failure. With --second-network,
# h1..h(MAX-1) have eth1 and hMAX has ens5 on a shared second network, and an extra host
# h(MAX+1) has an isolated eth1 that nobody can reach. The row for N uses h1..hN only (never the
# isolated host), so every host in it has two reachable interfaces and a smaller N is a valid
# subset of the larger set. One last row adds the isolated host to h1,h2 to show what an
# unreachable interface costs (its probes wait for the connect to fail).
# Discovery time is what horarun --verbose logs on stderr ("network discovery on N hosts took
# X ms"); a run that fails or does not log it makes its row say so.
# Prints why and returns 0 when something it needs is missing.

# bench_discovery [N...]: prints a heading, then one row per host count.
bench_discovery() (
  set -uo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1
  local build="${BUILD_DIR:-build}" runs=3
  local -a counts=("$@")
  [ ${#counts[@]} -gt 0 ] || counts=(2 4 8)
  local n max=0
  for n in "${counts[@]}"; do
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$((10#$n))" -lt 2 ] || [ "$((10#$n))" -gt 32 ]; then
      echo "bench_discovery: host counts must be 2..32, got '$n'" >&2
      return 2
    fi
    [ "$((10#$n))" -le "$max" ] || max=$((10#$n))
  done
  local isolated="h$((max + 1))"
  echo "== network discovery: N test hosts x 1 rank over SSH, 2 interfaces each" \
    "(--second-network), running true (median of $runs) =="
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "skipped: needs root and ip netns (test hosts are network namespaces)"
    return 0
  fi
  [ -x "$build/cli/horarun" ] || { echo "skipped: $build/cli/horarun is not built"; return 0; }
  local vars
  vars=$(timeout 600 scripts/testhosts.sh up --index auto --hosts "$max" --second-network 2>/dev/null) ||
    { echo "skipped: scripts/testhosts.sh up --hosts $max --second-network failed"; return 0; }
  eval "$vars"
  local index=$HORA_TESTHOSTS_INDEX config=$HORA_TESTHOSTS_SSH_CONFIG
  trap 'scripts/testhosts.sh down --index '"$index"' >/dev/null 2>&1' EXIT
  trap 'exit 130' INT TERM

  local fmt='%-34s %15s %15s   %s\n'
  # shellcheck disable=SC2059
  printf "$fmt" "hosts (-H, 1 slot each)" "discovery (ms)" "job wall (s)" "discovery ms of each run"

  # row LABEL NHOSTS HOSTLIST: runs horarun $runs times on HOSTLIST (h1:1,...) and prints the
  # median discovery time (from horarun's log) and the median wall time of the whole job.
  row() {
    local label=$1 nhosts=$2 hostlist=$3
    local -a disc=() wall=()
    local i t0 t1 out rc ms
    for ((i = 0; i < runs; i++)); do
      t0=${EPOCHREALTIME//[.,]/}
      rc=0
      out=$(timeout 120 "$build/cli/horarun" --verbose --ssh-config "$config" -np "$nhosts" \
        -H "$hostlist" true 2>&1 </dev/null) || rc=$?
      t1=${EPOCHREALTIME//[.,]/}
      if [ "$rc" -ne 0 ]; then
        # shellcheck disable=SC2059
        printf "$fmt" "$label" "FAILED" "" "run $((i + 1)) exited $rc"
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/            /'
        return 0
      fi
      ms=$(printf '%s\n' "$out" |
        sed -n "s/.*network discovery on $nhosts hosts took \([0-9][0-9]*\) ms.*/\1/p" | head -n 1)
      if [ -z "$ms" ]; then
        # shellcheck disable=SC2059
        printf "$fmt" "$label" "NOT LOGGED" "" \
          "run $((i + 1)): no 'network discovery on $nhosts hosts took' line on stderr"
        return 0
      fi
      disc+=("$ms")
      wall+=($((10#$t1 - 10#$t0)))
    done
    local mid=$(((runs + 1) / 2)) dmed wmed
    dmed=$(printf '%s\n' "${disc[@]}" | sort -n | sed -n "${mid}p")
    wmed=$(printf '%s\n' "${wall[@]}" | sort -n | sed -n "${mid}p")
    # shellcheck disable=SC2059
    printf "$fmt" "$label" "$dmed" "$(printf '%d.%03d' $((wmed / 1000000)) $(((wmed % 1000000) / 1000)))" \
      "${disc[*]}"
  }

  local list j
  for n in "${counts[@]}"; do
    n=$((10#$n))
    list=h1:1
    for ((j = 2; j <= n; j++)); do list+=",h$j:1"; done
    if [ "$n" -le 3 ]; then
      row "$n: $list" "$n" "$list"
    else
      row "$n: h1..h$n" "$n" "$list"
    fi
  done
  row "3: h1,h2 + isolated $isolated" 3 "h1:1,h2:1,$isolated:1"
)

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  bench_discovery "$@"
fi
