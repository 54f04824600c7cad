#!/usr/bin/env bash
# Training steps per second: hora.torch.DistributedOptimizer versus torch's
# DistributedDataParallel over gloo, the same model and data, both launched by horarun, at
# -np 2 and 4 (override with NPS="2 4"). Prints a table with the ratio hora/ddp, and the steps/s
# of the same ranks training alone (no gradient exchange: the ceiling of both).
#   bench/bench_torch.sh [BUILD_DIR]        (default: build; needs hora.torch built)
# Each figure is the best of REPEATS runs (default 3), to damp a loaded machine's noise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
case "$build" in /*) ;; *) build=$root/$build ;; esac
py=${PYTHON:-/usr/bin/python3}
horarun=$build/cli/horarun
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
STEPS=${STEPS:-300}
REPEATS=${REPEATS:-3}
NPS=${NPS:-"2 4"}

if ! "$py" -c 'import hora.torch' >/dev/null 2>&1; then
  echo "bench_torch.sh: hora.torch is not importable from $build/python (meson -Dtorch=enabled)" >&2
  exit 77
fi

# Prints the best steps/s of REPEATS runs of one mode at one size.
best() {
  local mode=$1 np=$2 best=0 out v
  for _ in $(seq "$REPEATS"); do
    out=$(timeout 600 "$horarun" -np "$np" "$py" "$here/torch_train_bench.py" --mode "$mode" \
            --steps "$STEPS" 2>&1) || { echo "bench_torch.sh: $mode -np $np failed:" >&2; echo "$out" >&2; exit 1; }
    v=$(echo "$out" | sed -n 's/.*steps_per_sec=\([0-9.]*\).*/\1/p' | head -1)
    best=$(awk -v a="$best" -v b="$v" 'BEGIN { print (b > a) ? b : a }')
  done
  echo "$best"
}

printf '%-4s %16s %16s %8s %16s\n' np 'hora steps/s' 'ddp steps/s' 'hora/ddp' 'alone steps/s'
for np in $NPS; do
  h=$(best hora "$np")
  d=$(best ddp "$np")
  a=$(best local "$np")
  printf '%-4s %16s %16s %8s %16s\n' "$np" "$h" "$d" \
    "$(awk -v a="$h" -v b="$d" 'BEGIN { printf "%.2f", a / b }')" "$a"
done
