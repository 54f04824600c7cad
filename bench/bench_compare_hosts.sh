#!/usr/bin/env bash
# hora vs Open MPI across two test hosts, side by side in one run (the cross-host
# targets): 2 hosts x 2 ranks (network namespaces from scripts/testhosts.sh, sshd on each; the
# hosts share this machine's cores, so the "network" is a veth bridge), allreduce float32 sum,
# out of place: the 4 B time and the 16 MiB bus bandwidth of
#   - hora, hierarchical (HORA_HIERARCHICAL_ALLREDUCE=1: shared memory inside each host, Gloo
#     between them; the default for this layout) and flat (=0: one Gloo ring over all ranks);
#   - Open MPI over TCP only (--mca btl self,tcp), with mpi_yield_when_idle (4 busy-polling ranks
#     on 2 cores would otherwise take turns by the scheduler's time slice). Its shared-memory
#     transport is left out: the namespaces share one host name, so Open MPI takes ranks of
#     both test hosts for neighbours and its vader transport crashes (SIGSEGV in the allreduce).
# Ratios: hora (hierarchical) / MPI TCP-only: of times at 4 B (lower is better), of bus
# bandwidth at 16 MiB (higher is better).
#
#   bench/bench_compare_hosts.sh [BUILD_DIR]        (default: build; needs root for namespaces)
# Brings its test hosts up and takes them down again, even when it fails; prints why and exits 77
# when something it needs is missing.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
case "$build" in /*) ;; *) build=$here/$build ;; esac
horarun=$build/cli/horarun
hora_bench=$build/bench/allreduce_bench
mpi_bench=$build/bench/mpi_allreduce_bench
cd "$here"
[[ -x $horarun && -x $hora_bench ]] || { echo "compare hosts: skipped: build $build first"; exit 77; }
[[ -x $mpi_bench ]] && command -v mpirun >/dev/null ||
  { echo "compare hosts: skipped: no MPI (install libopenmpi-dev: scripts/setup.sh)"; exit 77; }
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "compare hosts: skipped: needs root and ip netns (test hosts are network namespaces)"
  exit 77
fi
vars=$(scripts/testhosts.sh up --index auto --hosts 2 2>/dev/null) ||
  { echo "compare hosts: skipped: scripts/testhosts.sh up failed"; exit 77; }
eval "$vars"
index=$HORA_TESTHOSTS_INDEX
config=$HORA_TESTHOSTS_SSH_CONFIG
results=$(mktemp)
trap 'rm -f "$results"; scripts/testhosts.sh down --index '"$index"' >/dev/null 2>&1' EXIT
subnet="198.18.$index.0/24"
hosts=h1:2,h2:2

# time_and_busbw: "usec busbw" of the out-of-place column of the one row of allreduce_bench's
# (or its MPI twin's) table.
time_and_busbw() { awk '/^ +[0-9]/ { print $6, $8; exit }'; }
# Iterations as in bench_compare.sh's size classes, fewer at 4 B: one TCP round trip between
# namespaces costs tens of microseconds to milliseconds.
sizes=("-b 4 -e 4 -n 200 -w 20" "-b 16M -e 16M -n 12 -w 2")

run_hora() {  # tag hierarchical
  local args
  for args in "${sizes[@]}"; do
    # shellcheck disable=SC2086
    echo "$1 ${args%% -e*} $(HORA_HIERARCHICAL_ALLREDUCE=$2 timeout 300 "$horarun" \
      --ssh-config "$config" -np 4 -H "$hosts" "$hora_bench" --collective allreduce $args \
      2>/dev/null | sed -n 's/^\[0\]<stdout>://p' | time_and_busbw)" >>"$results"
  done
}
run_mpi() {  # tag btl-list (--mca btl)
  local args
  for args in "${sizes[@]}"; do
    # shellcheck disable=SC2086
    echo "$1 ${args%% -e*} $(timeout 300 mpirun --allow-run-as-root -np 4 -H "$hosts" \
      --mca plm_rsh_args "-F $config" --mca oob_tcp_if_include "$subnet" \
      --mca btl_tcp_if_include "$subnet" --mca btl "$2" --mca mpi_yield_when_idle 1 \
      "$mpi_bench" --collective allreduce $args 2>/dev/null | time_and_busbw)" >>"$results"
  done
}
# Each cell is the median of REPEATS runs (default 5); the three programs run back to back in an
# order that rotates between repeats, so a slow minute of the shared machine hits all alike.
REPEATS=${REPEATS:-5}
programs=("run_hora hier 1" "run_hora flat 0" "run_mpi mpi_tcp self,tcp")
for ((rep = 0; rep < REPEATS; rep++)); do
  for ((i = 0; i < 3; i++)); do
    ${programs[(i + rep) % 3]}
  done
done

echo "# allreduce across 2 test hosts x 2 ranks on $(hostname) ($(nproc) cores shared by both hosts), float32 sum, out of place, median of $REPEATS"
printf '%-44s %14s %16s\n' "" "4 B time (us)" "16 MiB busbw (GB/s)"
# Medians per program and size of the runs that printed a row (a failed run prints none).
awk "$(cat "$here/bench/median.awk")"'
  $4 != "" { key = $1 " " $3; tl[key] = tl[key] " " $4; bl[key] = bl[key] " " $5 }
  END {
    for (k in tl) { t[k] = median(tl[k]); b[k] = median(bl[k]) }
    n = split("hier flat mpi_tcp", tags, " ")
    label["hier"] = "hora, hierarchical (the default here)"
    label["flat"] = "hora, HORA_HIERARCHICAL_ALLREDUCE=0"
    label["mpi_tcp"] = "Open MPI, TCP only (btl self,tcp)"
    for (i = 1; i <= n; i++) {
      s = tags[i]
      printf "%-44s %14s %16s\n", label[s], (s " 4" in t && t[s " 4"] != "" ? t[s " 4"] : "FAILED"),
        (s " 16M" in b && b[s " 16M"] != "" ? b[s " 16M"] : "FAILED")
    }
    if (t["mpi_tcp 4"] > 0 && b["mpi_tcp 16M"] > 0 && t["hier 4"] != "" && b["hier 16M"] != "")
      printf "ratio hora (hierarchical) / MPI TCP-only: 4 B time %.2f (target <= 1), 16 MiB busbw %.2f (target >= 1)\n",
        t["hier 4"] / t["mpi_tcp 4"], b["hier 16M"] / b["mpi_tcp 16M"]
  }' "$results"
