#!/usr/bin/env bash
# The Fashion-MNIST example's training time per epoch through the async API (the default:
# hora::allreduce_async on every gradient, tensor fusion, the engine) and through the blocking
# API (--blocking: one hora::allreduce per gradient on the caller's thread), at -np 1, 2 and 4
# on this host (override with NPS="1 2 4"). The targets: async within 5% of blocking at
# every size, and -np 4 faster per epoch than -np 1.
#   bench/bench_training.sh [BUILD_DIR]        (default: build)
# Each figure is the median of REPEATS one-epoch runs (default 9), the two modes interleaved so
# that a machine whose load drifts moves both alike. The time is the example's own "time" of
# the epoch (training steps only: no start-up, data loading or evaluation).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
case "$build" in /*) ;; *) build=$here/$build ;; esac
horarun=$build/cli/horarun
example=$build/examples/fashion_mnist
REPEATS=${REPEATS:-9}
NPS=${NPS:-"1 2 4"}
for f in "$horarun" "$example"; do
  [[ -x $f ]] || { echo "bench_training: $f is missing; build it (ninja -C $build)" >&2; exit 1; }
done

# epoch_time NP MODE-ARGS... -> rank 0's training time of its one epoch, in seconds
epoch_time() {
  local np=$1 out t
  shift
  out=$(timeout 600 "$horarun" -np "$np" -H "localhost:$np" "$example" --epochs 1 "$@" 2>&1) ||
    { echo "bench_training: -np $np $* failed:" >&2; echo "$out" >&2; exit 1; }
  t=$(echo "$out" | sed -n 's/^\[0\]<stdout>:epoch 1\/1 .* time \([0-9.]*\) s .*/\1/p')
  [[ -n $t ]] || { echo "bench_training: no epoch time in:" >&2; echo "$out" >&2; exit 1; }
  echo "$t"
}

median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-4s %12s %12s %15s %22s\n' np 'async s' 'blocking s' 'async/blocking' 'async speed-up vs np 1'
async1=""
for np in $NPS; do
  a=() b=()
  for _ in $(seq "$REPEATS"); do
    a+=("$(epoch_time "$np")")
    b+=("$(epoch_time "$np" --blocking)")
  done
  ma=$(echo "${a[*]}" | median)
  mb=$(echo "${b[*]}" | median)
  [[ $np == 1 ]] && async1=$ma
  speed="-"
  [[ -n $async1 ]] && speed=$(awk -v one="$async1" -v t="$ma" 'BEGIN { printf "%.2fx", one / t }')
  printf '%-4s %12s %12s %15s %22s\n' "$np" "$ma" "$mb" \
    "$(awk -v x="$ma" -v y="$mb" 'BEGIN { printf "%.3f", x / y }')" "$speed"
done
echo "(median of $REPEATS runs of 1 epoch each; async/blocking <= 1.05 is the target)"
