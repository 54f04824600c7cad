#!/usr/bin/env bash
# hora vs Open MPI on this host, side by side in one run (the targets):
#   allreduce 4 B (2000 calls), 1 MiB (200), 16 MiB (12), 64 MiB (3); allgather, broadcast,
#   reducescatter 1 MiB, 16 MiB; at -np 2 and 4 (NP="2 4"), float32 sum, nccl-tests columns
#   from allreduce_bench and its MPI twin bench/mpi_allreduce_bench (out-of-place times;
#   broadcast's in-place, its only form).
# Columns: hora (shared memory, the default), hora with HORA_SHM=0 (Gloo over loopback),
# Open MPI with its shared-memory transport, Open MPI TCP only (--mca btl self,tcp); then the
# ratios hora/MPI-shm and hora/MPI-tcp: of times for 4 B (lower is better), of busbw otherwise
# (higher is better).
# Binding (BIND, default core): every program of the table binds its ranks the same way, hora
# with `--bind-to core` and mpirun with `--bind-to core:overload-allowed` (each rank one CPU,
# ranks sharing them round-robin at -np 4 on 2 CPUs); BIND=none runs both unbound. Unbound on
# this 2-CPU VM, a run now and then places both ranks on one CPU for a while and a row swings by
# 2-15x for either program; bound, the rows swing less (the VM's host still moves both).
#
#   bench/bench_compare.sh [BUILD_DIR]        (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
NP=${NP:-2 4}
horarun=$build/cli/horarun
hora_bench=$build/bench/allreduce_bench
mpi_bench=$build/bench/mpi_allreduce_bench
for f in "$horarun" "$hora_bench"; do
  [[ -x $f ]] || { echo "bench_compare: $f is missing; build it (ninja -C $build)" >&2; exit 1; }
done
if [[ ! -x $mpi_bench ]] || ! command -v mpirun >/dev/null; then
  echo "bench_compare: no MPI ($mpi_bench or mpirun missing): install libopenmpi-dev (scripts/setup.sh) and reconfigure" >&2
  exit 77
fi
BIND=${BIND:-core}
case $BIND in
  core) mpi_bind=core:overload-allowed ;;
  none) mpi_bind=none ;;
  *) echo "bench_compare: BIND=$BIND: use core or none" >&2; exit 2 ;;
esac
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to "$mpi_bind")

# rows COLLECTIVE < bench output  ->  "collective bytes usec busbw" per row
rows() {
  awk -v want="$1" '
    /^# Collective:/ { coll = $3 }
    /^ +[0-9]/ && coll == want {
      # out-of-place: $6 time, $8 busbw; in-place: $10 time, $12 busbw (broadcast)
      if ($6 == "n/a") print coll, $1, $10, $12; else print coll, $1, $6, $8
    }'
}

# run_set NAME NP COLLECTIVES ARGS...  ->  appends rows tagged NAME to $results
results=$(mktemp)
trap 'rm -f "$results"' EXIT
run_hora() {  # tag np shm collective bench-args...
  local tag=$1 np=$2 shm=$3 coll=$4; shift 4
  HORA_SHM=$shm timeout 600 "$horarun" --bind-to "$BIND" -np "$np" -H "localhost:$np" "$hora_bench" \
    --collective "$coll" "$@" 2>/dev/null | sed -n 's/^\[0\]<stdout>://p' | rows "$coll" |
    sed "s/^/$tag $np /" >>"$results"
}
run_mpi() {  # tag np btl collective bench-args...
  local tag=$1 np=$2 btl=$3 coll=$4; shift 4
  local extra=()
  [[ $btl == tcp ]] && extra=(--mca btl self,tcp)
  timeout 600 "${mpirun[@]}" "${extra[@]}" -np "$np" "$mpi_bench" --collective "$coll" "$@" \
    2>/dev/null | rows "$coll" | sed "s/^/$tag $np /" >>"$results"
}

# Iterations per size class, the same for both programs: a 4 B call takes microseconds, so it
# is averaged over thousands (20 calls swung it between 0.3 and 8 us); above 1 MiB both
# benchmarks scale -n down in proportion (16 MiB: 12 calls, 64 MiB: 3).
jobs=("allreduce -b 4 -e 4 -n 2000 -w 200" "allreduce -b 1M -e 64M -f 4 -n 200 -w 20")
for coll in allgather broadcast reducescatter; do jobs+=("$coll -b 1M -e 16M -f 16 -n 200 -w 20"); done
# Each job runs for the four programs back to back (in an order that rotates between repeats),
# so a drift of the shared machine's speed between minutes hits every column of a row alike; each
# cell is the median of REPEATS runs (default 5: the VM has slow minutes that a median of 3 can
# still land in).
REPEATS=${REPEATS:-5}
tags=(hora gloo mpi_shm mpi_tcp)
for ((rep = 0; rep < REPEATS; rep++)); do
  for np in $NP; do
    for job in "${jobs[@]}"; do
      for ((i = 0; i < 4; i++)); do
        tag=${tags[$(((i + rep) % 4))]}
        case $tag in
          hora) run=(run_hora hora "$np" 1) ;;
          gloo) run=(run_hora gloo "$np" 0) ;;
          mpi_shm) run=(run_mpi mpi_shm "$np" shm) ;;
          mpi_tcp) run=(run_mpi mpi_tcp "$np" tcp) ;;
        esac
        # shellcheck disable=SC2086
        "${run[@]}" $job
      done
    done
  done
done

echo "# hora vs Open MPI on $(hostname) ($(nproc) cores, $(uname -r)), float32 sum, ranks bound: $BIND"
echo "# times in us, busbw in GB/s; ratio = hora/MPI (4 B: of times; otherwise: of busbw)"
printf '%-14s %3s %9s | %17s | %17s | %17s | %17s | %7s %7s\n' collective np size \
  "hora shm" "hora HORA_SHM=0" "MPI shm" "MPI tcp" "/shm" "/tcp"
awk "$(cat "$here/bench/median.awk")"'
  { key = $3 " " $2 " " $4; ts[$1 " " key] = ts[$1 " " key] " " $5; bs[$1 " " key] = bs[$1 " " key] " " $6
    if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
  END {
    for (id in ts) { t[id] = median(ts[id]); b[id] = median(bs[id]) }
    for (i = 1; i <= n; i++) {
      split(order[i], k, " "); coll = k[1]; np = k[2]; size = k[3]
      if (!(coll == "allreduce" && (size == 4 || size == 1048576 || size == 16777216 || size == 67108864)) &&
          !(coll != "allreduce" && (size == 1048576 || size == 16777216))) continue
      line = sprintf("%-14s %3s %9s", coll, np, size)
      for (j = 1; j <= 4; j++) {
        tag = (j == 1 ? "hora" : j == 2 ? "gloo" : j == 3 ? "mpi_shm" : "mpi_tcp")
        id = tag " " order[i]
        if (id in t) line = line sprintf(" | %8.2fus %5.2fG", t[id], b[id])
        else line = line sprintf(" | %17s", "-")
      }
      for (j = 3; j <= 4; j++) {
        tag = (j == 3 ? "mpi_shm" : "mpi_tcp")
        h = "hora " order[i]; m = tag " " order[i]
        if (!(h in t) || !(m in t)) { line = line sprintf(" %7s", "-"); continue }
        if (size == 4) r = t[h] / t[m]; else r = (b[m] > 0 ? b[h] / b[m] : 0)
        line = line sprintf(" %7.2f", r)
      }
      print line
    }
  }' "$results"
