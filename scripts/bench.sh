#!/usr/bin/env bash
# hora's benchmarks, each printed under a heading: the one entry point for everything in bench/.
# Installs what is missing and builds first.
#
#   scripts/bench.sh                      # every benchmark
#   scripts/bench.sh collectives          # one section (names: see usage below)
#   scripts/bench.sh fusion rendezvous    # several sections, in the order given
#   scripts/bench.sh collectives -e 1M    # arguments after one section's name go to it
#   BUILD_DIR=build-foo scripts/bench.sh  # another build directory (default: build)
#   NO_BUILD=1 scripts/bench.sh           # skip set-up and build (the binaries exist already)
#
# Adding a benchmark: write a function bench_<name> that prints a heading and its results, add
# <name> to BENCHMARKS (the order `all` runs them in), and describe it in usage(). The loop at
# the bottom dispatches every name in BENCHMARKS. The programs live in bench/ (bench/meson.build
# builds them into $BUILD_DIR/bench/); a longer section may live in its own bench/<name>.sh,
# sourced below. Ranks are started with $BUILD_DIR/cli/horarun.
# A benchmark that needs something optional prints why it is skipped and returns 0, so `all`
# always runs to the end.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build}"
BENCHMARKS=(collectives compare training fusion torch torch_steps rendezvous scale launch remote_launch
  discovery elastic_recovery horovod_elastic spark_start step_limit)

# bench_remote_launch lives in bench/remote_launch.sh (it brings up its own SSH test hosts).
# shellcheck source=bench/remote_launch.sh
source bench/remote_launch.sh
# bench_discovery in bench/discovery.sh (network discovery time on 2, 4 and 8 test hosts).
# shellcheck source=bench/discovery.sh
source bench/discovery.sh
# bench_elastic_recovery in bench/elastic_recovery.sh (elastic reset vs full restart, 2 test hosts).
# shellcheck source=bench/elastic_recovery.sh
source bench/elastic_recovery.sh
# bench_horovod_elastic in bench/horovod_elastic.sh (Horovod's elastic example: horovodrun vs horarun).
# shellcheck source=bench/horovod_elastic.sh
source bench/horovod_elastic.sh

# bench_spark_start in bench/spark_start.sh (hora.spark vs TorchDistributor vs horovod.spark).
# shellcheck source=bench/spark_start.sh
source bench/spark_start.sh
# bench_step_limit in bench/step_limit.sh (spark_start's step: compute and allreduce limits).
# shellcheck source=bench/step_limit.sh
source bench/step_limit.sh

# bench_scale in bench/bench_scale.sh (rendezvous at 1024/4096 ranks, a real -np 128 job).
# shellcheck source=bench/bench_scale.sh
source bench/bench_scale.sh

# hora vs Open MPI side by side in one run (bench/bench_compare.sh).
bench_compare() {
  echo "== compare: hora vs Open MPI (shared memory and TCP-only), -np 2 and 4 on this host"
  bash bench/bench_compare.sh "$BUILD_DIR" "$@" || echo "(compare: skipped or failed, rc=$?)"
  echo "== compare: hora vs Open MPI across 2 test hosts x 2 ranks (hierarchical on and off)"
  bash bench/bench_compare_hosts.sh "$BUILD_DIR" || echo "(compare hosts: skipped or failed, rc=$?)"
}

# The Fashion-MNIST example's epoch time, async API vs blocking (bench/bench_training.sh).
bench_training() {
  echo "== training: fashion_mnist epoch time, async vs --blocking, -np 1, 2 and 4"
  bash bench/bench_training.sh "$BUILD_DIR" "$@" || echo "(training: failed, rc=$?)"
}

# hora.keras vs tf.distribute.MultiWorkerMirroredStrategy (bench/keras_steps.sh).
BENCHMARKS+=(keras_steps)
bench_keras_steps() {
  heading "keras_steps: Keras 3 steps/s, hora.keras vs MultiWorkerMirroredStrategy"
  bash bench/keras_steps.sh || echo "(keras_steps: failed, rc=$?)"
}
BENCHMARKS+=(tf_allreduce)
bench_tf_allreduce() {
  heading "tf_allreduce: allreduce from TF tensors, hora.tensorflow vs tf.distribute vs C++"
  KS_ALLREDUCE_ONLY=1 bash bench/keras_steps.sh || echo "(tf_allreduce: failed, rc=$?)"
}

# hora.torch.DistributedOptimizer vs DistributedDataParallel over torch's gloo (bench_torch.sh).
bench_torch() {
  echo "== torch: training steps/s, hora.torch vs DDP over gloo, -np 2 and 4"
  bash bench/bench_torch.sh "$BUILD_DIR" "$@" || echo "(torch: skipped or failed, rc=$?)"
}

# ---- torch_steps: a communication-bound model's steps/s, hora.torch vs Horovod vs DDP

# One run of bench/torch_steps_bench.py; prints its steps/s (empty when it failed, with the
# output on stderr). torch_steps_run LAUNCHER FRAMEWORK NP HOSTS [SSH_CONFIG NETNS]
torch_steps_run() {
  local launcher=$1 fw=$2 np=$3 hosts=$4 config=${5:-} netns=${6:-} out pp=$TS_HORA_PY
  local -a cmd
  [ "$fw" = horovod ] && pp=$TS_HVD/site
  if [ "$launcher" = horarun ]; then
    cmd=("$TS_BUILD/cli/horarun" -np "$np" -H "$hosts")
    [ -n "$config" ] && cmd+=(--ssh-config "$config")
  else
    # Horovod's own launcher; across test hosts it runs inside h1's namespace (the hosts' names
    # resolve there) and reaches them with an `ssh` that reads the test hosts' ssh_config.
    cmd=(/usr/bin/python3 "$TS_HVD/site/bin/horovodrun" --gloo -np "$np" -H "$hosts")
    # (--network-interfaces skips its NIC discovery, whose remote task lacks PYTHONPATH)
    [ -n "$netns" ] && cmd+=(--network-interfaces eth0)
    [ -n "$netns" ] && cmd=(ip netns exec "$netns" env "PATH=$TS_SSHWRAP:$PATH" "${cmd[@]}")
  fi
  # One BLAS thread per rank for every contender (horarun sets it itself for hosts with several
  # ranks): the test hosts are namespaces sharing this machine's cores.
  [ "$launcher" = horarun ] && cmd+=(-x OMP_NUM_THREADS)
  out=$(OMP_NUM_THREADS=1 PYTHONPATH=$pp timeout "${TS_TIMEOUT:-300}" "${cmd[@]}" /usr/bin/python3 \
    "$TS_ROOT/bench/torch_steps_bench.py" --framework "$fw" --steps "${TS_STEPS:-15}" 2>&1 </dev/null)
  local v
  v=$(sed -n 's/.*steps_per_sec=\([0-9.]*\).*/\1/p' <<<"$out" | head -1)
  if [ -z "$v" ]; then
    echo "torch_steps: $launcher $fw -np $np -H $hosts failed:" >&2
    tail -n 15 <<<"$out" >&2
  fi
  printf '%s' "$v"
}

# "median min max" of the numbers on stdin (empty lines ignored).
torch_steps_stats() {
  sort -g | awk 'NF { v[n++] = $1 } END { if (n == 0) { print "- - -"; exit }
    m = (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; print m, v[0], v[n - 1] }'
}

bench_torch_steps() {
  heading "torch_steps: 4 x Linear(2048, 2048) (67 MB of fp32 gradients a step), batch 16 per" \
    "rank: hora.torch vs Horovod 0.28.1 vs DDP over gloo, median of ${TS_REPEATS:-5} interleaved runs"
  TS_ROOT=$(pwd)
  # TS_BUILD: a copy of the build's cli/, python/ and runtime/ (the same layout), so that a
  # rebuild of $BUILD_DIR during the long run does not pull horarun from under it.
  TS_BUILD=${TS_BUILD:-$TS_ROOT/$BUILD_DIR}
  TS_HORA_PY=$TS_BUILD/python
  local archive=${HOROVOD_ARCHIVE:-$TS_ROOT/../shared/horovod/horovod-0.28.1-torch1.13-cpu-gloo.tar.xz}
  if ! PYTHONPATH=$TS_HORA_PY /usr/bin/python3 -c 'import hora.torch' >/dev/null 2>&1; then
    echo "torch_steps: skipped: hora.torch is not importable from $TS_HORA_PY (-Dtorch=enabled)"
    return 0
  fi
  [ -r "$archive" ] || { echo "torch_steps: skipped: no Horovod archive at $archive"; return 0; }
  TS_HVD=$(mktemp -d)
  TS_SSHWRAP=$TS_HVD/sshwrap
  local index="" config=""
  # shellcheck disable=SC2064
  trap "rm -rf '$TS_HVD'; trap - RETURN" RETURN
  tar -xJf "$archive" -C "$TS_HVD"
  # Debian's python3-torch multiplies matrices with whichever libblas.so.3 is installed: the
  # reference BLAS makes this model's step ~600 ms of arithmetic (communication under a tenth of
  # it, every framework alike within the noise); OpenBLAS (libopenblas0-pthread, setup.sh) ~150.
  echo "BLAS: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)"
  local -a configs=("np2-1host 2 localhost:2")
  if [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 &&
    vars=$(scripts/testhosts.sh up --index auto --hosts 2 2>/dev/null); then
    eval "$vars"
    index=$HORA_TESTHOSTS_INDEX
    config=$HORA_TESTHOSTS_SSH_CONFIG
    # shellcheck disable=SC2064
    trap "rm -rf '$TS_HVD'; scripts/testhosts.sh down --index $index >/dev/null 2>&1; trap - RETURN" RETURN
    # shellcheck disable=SC2064
    trap "scripts/testhosts.sh down --index $index >/dev/null 2>&1" EXIT
    mkdir -p "$TS_SSHWRAP"
    printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$config" >"$TS_SSHWRAP/ssh"
    chmod +x "$TS_SSHWRAP/ssh"
    configs+=("2hosts-x1 2 h1:1,h2:1")
  else
    echo "(2 hosts x 1: skipped: needs root and ip netns for scripts/testhosts.sh)"
  fi
  local -a contenders=("horovodrun horovod" "horarun horovod" "horarun hora" "horarun ddp")
  local results c rep i spec name np hosts cfg ns
  results=$(mktemp)
  for spec in "${configs[@]}"; do
    read -r name np hosts <<<"$spec"
    cfg="" ns=""
    if [ "$name" != np2-1host ]; then cfg=$config ns=hora$index-h1; fi
    echo "$name: load before: $(uptime | sed 's/.*load average: //')"
    for ((rep = 0; rep < ${TS_REPEATS:-5}; rep++)); do
      # The contenders take turns, starting one further on each repeat, so that a busy minute
      # of the shared machine falls on all of them alike.
      for ((i = 0; i < ${#contenders[@]}; i++)); do
        c=${contenders[(i + rep) % ${#contenders[@]}]}
        # shellcheck disable=SC2086
        echo "$name $c $(torch_steps_run $c "$np" "$hosts" "$cfg" "$ns")" >>"$results"
      done
    done
    echo "$name: load after:  $(uptime | sed 's/.*load average: //')"
  done
  printf '\n%-10s %-24s %14s %16s %12s\n' config launcher/framework "median steps/s" "min-max" "/ horovodrun"
  local base med lo hi
  for spec in "${configs[@]}"; do
    read -r name _ <<<"$spec"
    base=$(awk -v n="$name" '$1 == n && $2 == "horovodrun" { print $4 }' "$results" |
      torch_steps_stats | cut -d' ' -f1)
    for c in "${contenders[@]}"; do
      read -r med lo hi < <(awk -v n="$name" -v l="${c% *}" -v f="${c#* }" \
        '$1 == n && $2 == l && $3 == f { print $4 }' "$results" | torch_steps_stats)
      printf '%-10s %-24s %14s %16s %12s\n' "$name" "${c/ //}" "$med" "$lo-$hi" \
        "$(awk -v a="$med" -v b="$base" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')"
    done
  done
  rm -f "$results"
}

# How many times the launch benchmark starts each job (the median is printed).
LAUNCH_RUNS=7

usage() {
  cat <<EOF
usage: scripts/bench.sh [all | SECTION... | SECTION ARGS...]

  collectives   allreduce_bench (nccl-tests table: allreduce, allgather, broadcast, alltoall,
                reducescatter; float32 sum) at -np 2 and -np 4 on localhost, 4 B to 64 MiB.
                ARGS go to allreduce_bench, e.g. --collective allreduce -e 1M
  compare       bench/bench_compare.sh: allreduce_bench and its Open MPI twin side by side at
                -np 2 and 4 (MPI over shared memory and TCP-only), ratios hora/MPI per row;
                then bench/bench_compare_hosts.sh: 2 test hosts x 2 ranks, allreduce 4 B time
                and 16 MiB busbw, hora hierarchical and flat vs Open MPI over TCP
  training      bench/bench_training.sh: the Fashion-MNIST example's epoch time through the
                async API (the default) and --blocking at -np 1, 2 and 4, median of 9 runs each,
                with async/blocking and the speed-up over -np 1
  torch         bench/bench_torch.sh: steps/s of hora.torch's DistributedOptimizer vs DDP over
                torch's gloo, both under horarun, at -np 2 and 4, with the ratio
  torch_steps   bench/torch_steps_bench.py: steps/s of 4 x Linear(2048, 2048), batch 16 per rank
                (communication-bound: 67 MB of gradients a step) with hora.torch under horarun,
                Horovod 0.28.1 (../shared/horovod, HOROVOD_ARCHIVE) under horarun and under its
                own horovodrun --gloo, and DDP over gloo under horarun; -np 2 on this host and
                2 test hosts x 1 (needs root); median of TS_REPEATS=5 interleaved runs of
                TS_STEPS=15 steps, min-max, and the ratio to Horovod under horovodrun
  keras_steps   bench/keras_steps.sh: Keras 3 steps/s of a 10.5 M-parameter MLP, batch 16 per
                rank: hora.keras (model.fit and a custom loop) vs tf.distribute's
                MultiWorkerMirroredStrategy, -np 2 on this host and 2 test hosts x 1 (needs
                root), median of KS_REPEATS=3 interleaved runs of KS_STEPS=20 steps; then an
                allreduce of 4 B and 16 MiB from TF tensors vs CollectiveAllReduce and the C++
                allreduce_bench (needs the tf venv: scripts/venv.sh tf)
  tf_allreduce  keras_steps' allreduce rows only (KS_ALLREDUCE_ONLY=1): KS_AR_REPEATS=5 rounds
                of hora.tensorflow, tf.distribute and the C++ bench, with hora's op / C++
  scale         bench/bench_scale.sh: rendezvous_bench at 1024 and 4096 ranks, and a real
                horarun -np 128 job's time and memory. ARGS: the job's rank count
  fusion        fusion_bench --launch --np 4: step time of 200 ResNet-like gradients (4 KiB to
                4 MiB) through the async API fused, unfused (HORA_FUSION_THRESHOLD=0), and
                through the blocking API one by one. ARGS go to fusion_bench, e.g. --steps 10
  rendezvous    rendezvous_bench: connect time and all-to-all address exchange time of N
                simulated ranks against one rendezvous server on 127.0.0.1.
                ARGS are the rank counts (default 64 256 1024)
  launch        time to start and finish a job of 4 ranks running \`true\` on localhost:
                horarun -np 4 -H localhost:4 true vs Open MPI's mpirun -np 4 true,
                median of $LAUNCH_RUNS runs each (mpirun is skipped when not installed)
  remote_launch the same job over SSH on 2 test hosts x 2 slots (network namespaces, needs
                root): horarun vs mpirun of the same shape, median of 5 runs each
  discovery     network discovery time that horarun --verbose logs, and the whole job's wall
                time, for -np N -H h1:1,...,hN:1 true on N test hosts with a second network
                (--second-network: two reachable interfaces per host; needs root), median of
                3 runs. One host set of max(N) hosts is brought up; each row uses h1..hN, never
                the extra isolated host, except a last row h1,h2 + the isolated host.
                ARGS are the host counts (default 2 4 8)
  elastic_recovery  bench/elastic_recovery.sh: on 2 test hosts x 2 (needs root), one worker of
                examples/elastic_train SIGKILLed mid-training; time from the kill to the first
                step after it, elastic reset (the job shrinks to h1) vs full restart
                (--max-restarts 1), median of RUNS=5 each, with the ratio; also with a PyTorch
                start (import torch) before each worker
  horovod_elastic  bench/horovod_elastic.sh [HOROVOD_SRC]: Horovod 0.28.1's own
                pytorch_synthetic_benchmark_elastic.py with real Horovod on 2 test hosts x 1
                (needs root, ../shared/horovod and Horovod's sources): a worker killed (shrink),
                its host listed again (grow), under horovodrun and under horarun
                --horovod-elastic; shrink and grow times, the job's time and its result, median
                of RUNS=3 interleaved runs, with the ratios
  spark_start   bench/spark_start.sh: on a standalone Spark cluster across 2 test hosts x 1 rank
                (needs root and the engines venv), hora.spark.run vs Spark's TorchDistributor
                (torchrun, DDP over gloo) vs Horovod 0.28.1's horovod.spark.run: time from run()
                to the first collective, the whole 20-step job's time and steps/s of a small MLP,
                median of SS_REPEATS=3 interleaved runs, ratios to TorchDistributor, and where
                the time to the first collective goes
  step_limit    bench/step_limit.sh: across 2 test hosts x 1 rank (needs root), spark_start's
                step taken apart side by side in one horarun job: compute alone, one allreduce
                of its 1.08 MB of gradients with torch.distributed gloo and with hora (plain and
                grouped), whole DDP and hora.torch steps, and the steps/s each allreduce allows
  all           every benchmark above, with default arguments (the default)

Environment: BUILD_DIR (default build); NO_BUILD=1 skips set-up and build.
EOF
}

heading() {
  printf '\n==== %s ====\n\n' "$*"
}

build() {
  if [ -n "${NO_BUILD:-}" ]; then return 0; fi
  bash scripts/build.sh "$BUILD_DIR" >/dev/null
}

# Rank 0 prints the table; dropping horarun's "[0]<stdout>:" prefix keeps its columns readable.
# Anything on stderr keeps its prefix, so it still says which rank it came from.
run_ranks() {
  local np="$1"
  shift
  "$BUILD_DIR/cli/horarun" -np "$np" -H "localhost:$np" "$@" | sed -u 's/^\[0\]<stdout>://'
}

# ---- launch timing helpers (shared by every benchmark that times whole jobs) ----

# Microseconds since the epoch, from bash's clock (no process started to read it).
now_us() {
  local t="${EPOCHREALTIME//[.,]/}"
  printf '%s' "$((10#$t))"
}

LAUNCH_ROW_FORMAT='%-56s %11s %9s %9s\n'

launch_table_header() {
  # shellcheck disable=SC2059
  printf "$LAUNCH_ROW_FORMAT" "command ($LAUNCH_RUNS runs each)" "median (ms)" "min (ms)" "max (ms)"
}

# launch_row LABEL COMMAND...: runs COMMAND LAUNCH_RUNS times (stdout and stderr discarded) and
# prints one table row with the median, min and max wall time. If a run exits non-zero, the row
# says so, the run's stderr follows, and the function still returns 0 (the table goes on).
launch_row() {
  local label="$1"
  shift
  local -a times=()
  local i start rc err
  err="$(mktemp)"
  for ((i = 0; i < LAUNCH_RUNS; i++)); do
    start="$(now_us)"
    rc=0
    "$@" >/dev/null 2>"$err" </dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
      # shellcheck disable=SC2059
      printf "$LAUNCH_ROW_FORMAT" "$label" "failed: run $((i + 1)) exited $rc" "" ""
      sed 's/^/    /' "$err"
      rm -f "$err"
      return 0
    fi
    times+=($(($(now_us) - start)))
  done
  rm -f "$err"
  local -a sorted
  mapfile -t sorted < <(printf '%s\n' "${times[@]}" | sort -n)
  local median="${sorted[$((LAUNCH_RUNS / 2))]}"
  # shellcheck disable=SC2059
  printf "$LAUNCH_ROW_FORMAT" "$label" "$(us_to_ms "$median")" "$(us_to_ms "${sorted[0]}")" \
    "$(us_to_ms "${sorted[$((LAUNCH_RUNS - 1))]}")"
}

us_to_ms() {
  printf '%d.%d' "$(($1 / 1000))" "$((($1 % 1000) / 100))"
}

# ---- the benchmarks ----

bench_collectives() {
  local np
  for np in 2 4; do
    heading "Collectives: allreduce_bench, -np $np -H localhost:$np, 4 B to 64 MiB"
    run_ranks "$np" "$BUILD_DIR/bench/allreduce_bench" -b 4 -e 64M -f 2 "$@"
  done
}

bench_fusion() {
  heading "Tensor fusion: fusion_bench --launch --np 4 (200 gradients, 4 KiB to 4 MiB, per step)"
  # fusion_bench starts its own horarun jobs (fused, unfused, blocking) and prints one table.
  "$BUILD_DIR/bench/fusion_bench" --launch --np 4 \
    --horarun "$BUILD_DIR/cli/horarun" "$@"
}

bench_rendezvous() {
  heading "Rendezvous: connect + all-to-all address exchange, N ranks on one server (127.0.0.1)"
  "$BUILD_DIR/bench/rendezvous_bench" "$@"
}

bench_launch() {
  heading "Launch: a job of 4 ranks running 'true' on localhost, start to exit"
  launch_table_header
  launch_row "horarun -np 4 -H localhost:4 true" "$BUILD_DIR/cli/horarun" -np 4 -H localhost:4 true
  local mpi=(mpirun --allow-run-as-root --oversubscribe -np 4 true)
  if command -v mpirun >/dev/null 2>&1; then
    launch_row "${mpi[*]}" "${mpi[@]}"
  else
    echo "mpirun not installed (apt-get install openmpi-bin to compare with Open MPI)"
  fi
}

is_benchmark() {
  local b
  for b in "${BENCHMARKS[@]}"; do
    if [ "$b" = "$1" ]; then return 0; fi
  done
  return 1
}

if [ $# -eq 0 ]; then set -- all; fi
case "$1" in
  -h | --help)
    usage
    exit 0
    ;;
  all)
    build
    for b in "${BENCHMARKS[@]}"; do "bench_$b"; done
    exit 0
    ;;
esac
# Leading section names run in order; anything after a single section's name is its ARGS.
sections=()
while [ $# -gt 0 ] && is_benchmark "$1"; do
  sections+=("$1")
  shift
done
if [ ${#sections[@]} -eq 0 ]; then
  echo "scripts/bench.sh: unknown benchmark '$1'" >&2
  usage >&2
  exit 2
fi
if [ $# -gt 0 ] && [ ${#sections[@]} -gt 1 ]; then
  echo "scripts/bench.sh: arguments ($*) go to one section only; give one section with them" >&2
  exit 2
fi
build
for b in "${sections[@]}"; do "bench_$b" "$@"; done
