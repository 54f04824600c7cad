#!/usr/bin/env bash
# The GPU checks of hora, as one command (docs/gpu.md):
#
#   scripts/gpu_check.sh --bundle            # here: build .gpu/, what the GPU machine lacks
#   scripts/gpu_check.sh REPORT_DIR          # on the GPU machine, with .gpu/ carried along
#   scripts/gpu_check.sh --local REPORT_DIR  # here, on build/ (or $HORA_BUILD_DIR): the same
#                                            # checks; those that need a GPU skip
#
# The GPU machine has CUDA, NCCL (the nvidia-nccl-cu13 wheel), a Python with PyTorch for CUDA,
# a C++ compiler, but none of Debian's packages hora builds against (Boost, libssh2, Gloo,
# spdlog, ...). So --bundle builds hora here (build-gpu/: release, NCCL on, torch off) and stages
# into .gpu/ the programs (horarun, the test/runtime/nccl tests, allreduce_bench), libhora, and every
# library they need beyond glibc, libstdc++, CUDA and NCCL; those come from the GPU machine, and
# of the carried ones only those it lacks are used. There, this script compiles hora.torch's
# extension (python/src/torch_ops.cc) against that machine's torch and libhora from .gpu/, then
# runs every check with a deadline, going on after a failure. It writes REPORT_DIR/report.md
# (versions, device, each check's result, the bench tables) and REPORT_DIR/checks.log.
#
# Checks: the gpu suite's programs (test/runtime/nccl); allreduce_bench over NCCL (-np 1) next to the CPU path (-np 1, 2);
# hora.torch on CUDA tensors (test/python/test_cuda.py, test_sync_batch_norm.py): every op at
# -np 1 through NCCL and at -np 2 on the one GPU staged through host memory, the CUDA jobs whose
# setup is wrong (test_cuda_jobs.py: hora's errors, not NCCL's), and training steps of a small
# CNN with SyncBatchNorm and DistributedOptimizer. Exit status: 0 when nothing failed.
set -u -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
bundle=$here/.gpu

usage() {
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# --- --bundle: build and stage .gpu/ here --------------------------------------------------
if [ "${1:-}" = --bundle ]; then
  set -e
  if [ ! -f build-gpu/build.ninja ]; then
    meson setup build-gpu --buildtype=release -Dnccl=enabled -Dtorch=disabled >/dev/null
  fi
  # Ninja's targets: paths inside build-gpu/.
  targets=(cli/horarun bench/allreduce_bench test/runtime/nccl/select_device_test
           test/runtime/nccl/unique_id_test
           test/runtime/nccl/cuda_api_test test/runtime/nccl/nccl_gpu_test
           runtime/libhora.so.0.1.0)  # check_paths: ignore
  flock /tmp/hora-build.lock ninja -C build-gpu "${targets[@]}"
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/deps" "$bundle/include"
  for t in "${targets[@]}"; do
    case $t in
      runtime/*) cp -L build-gpu/runtime/libhora.so.0 "$bundle/lib/" ;;
      *) cp "build-gpu/$t" "$bundle/bin/" ;;
    esac
  done
  ln -s libhora.so.0 "$bundle/lib/libhora.so"
  strip --strip-unneeded "$bundle"/bin/* "$bundle/lib/libhora.so.0"
  cp -r runtime/include/hora "$bundle/include/"
  # Libraries beyond the GPU machine's own (glibc, the C++ runtime, CUDA, NCCL).
  skip='^(linux-vdso|ld-linux|libc|libm|libpthread|librt|libdl|libstdc\+\+|libgcc_s|libcudart|libnccl|libcuda)\.'
  for f in "$bundle"/bin/* "$bundle/lib/libhora.so.0"; do
    ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
  done | sort -u | while read -r soname path; do
    if ! [[ $soname =~ $skip ]]; then cp -L "$path" "$bundle/deps/$soname"; fi
  done
  git rev-parse HEAD >"$bundle/commit"
  echo "staged $(du -sh "$bundle" | cut -f1) in $bundle (carry .gpu):"
  ls "$bundle/bin" "$bundle/deps"
  exit 0
fi

local_mode=0
if [ "${1:-}" = --local ]; then
  local_mode=1
  shift
fi
[ $# -eq 1 ] || usage
report_dir=$1
mkdir -p "$report_dir"
report_dir=$(cd "$report_dir" && pwd)
report=$report_dir/report.md
log=$report_dir/checks.log
: >"$log"
work=$(mktemp -d /tmp/hora-gpu-check.XXXXXX)
trap 'rm -rf "$work"' EXIT

failed=0
budget=${GPU_CHECK_BUDGET:-330}  # seconds for all checks; later ones are not started past it

# run_check NAME SECONDS CMD...: runs CMD (a program or an exported function) with a deadline,
# its output into checks.log; 0 PASS, 77 SKIP, anything else FAIL (124: over its deadline).
run_check() {
  local name=$1 secs=$2
  shift 2
  local start rc status
  if [ "$SECONDS" -ge "$budget" ]; then
    echo "===== $name: NOT RUN (the ${budget} s budget is spent)" | tee -a "$log"
    echo "| $name | NOT RUN (budget spent) | - |" >>"$report"
    failed=$((failed + 1))
    return 0
  fi
  [ "$secs" -gt $((budget - SECONDS + 30)) ] && secs=$((budget - SECONDS + 30))
  start=$EPOCHREALTIME
  {
    echo
    echo "===== $name: $*"
  } >>"$log"
  timeout -k 10 "$secs" bash -c '"$@"' run_check "$@" >>"$log" 2>&1 </dev/null
  rc=$?
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    124 | 137) status="FAIL (over its ${secs} s deadline)" ;;
    *) status="FAIL (exit $rc)" ;;
  esac
  [[ $status == FAIL* ]] && failed=$((failed + 1))
  local took
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
  printf '===== %s: %s in %.1f s\n' "$name" "$status" "$took" | tee -a "$log"
  printf '| %s | %s | %.1f s |\n' "$name" "$status" "$took" >>"$report"
  return 0
}

# --- Where the programs come from ----------------------------------------------------------
if [ "$local_mode" = 1 ]; then
  bin=${HORA_BUILD_DIR:-$here/build}
  horarun=$bin/cli/horarun
  gpu_tests=$bin/test/runtime/nccl
  bench=$bin/bench/allreduce_bench
  python=${PYTHON:-/usr/bin/python3}
  pythonpath=$bin/python
  for f in "$horarun" "$bench" "$gpu_tests/cuda_api_test"; do
    [ -x "$f" ] || {
      echo "gpu_check.sh --local: $f is missing; build first (scripts/build.sh)" >&2
      exit 1
    }
  done
else
  [ -x "$bundle/bin/horarun" ] || {
    echo "gpu_check.sh: $bundle/bin/horarun is missing: run scripts/gpu_check.sh --bundle" \
      "here first and carry .gpu with the tree" >&2
    exit 1
  }
  horarun=$bundle/bin/horarun
  gpu_tests=$bundle/bin
  bench=$bundle/bin/allreduce_bench
  python=${PYTHON:-python3}
  pythonpath=$work/python
  # CUDA's and NCCL's libraries: the system's, else the Python wheels' (nvidia-*-cu13).
  libdirs=()
  for so in libcudart.so.13 libnccl.so.2; do
    if ! ldconfig -p | grep -q "^[[:space:]]*$so "; then
      d=$("$python" - "$so" <<'EOF'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for p in glob.glob(os.path.join(r, 'nvidia', '**', sys.argv[1]), recursive=True):
        print(os.path.dirname(p)); sys.exit(0)
for p in glob.glob('/usr/local/cuda*/lib*/' + sys.argv[1]):
    print(os.path.dirname(p)); sys.exit(0)
EOF
      )
      [ -n "$d" ] && libdirs+=("$d")
    fi
  done
  # The carried libraries this machine lacks.
  mkdir -p "$work/deps"
  for f in "$bundle"/deps/*; do
    so=$(basename "$f")
    ldconfig -p | grep -q "^[[:space:]]*$so " || ln -s "$f" "$work/deps/$so"
  done
  export LD_LIBRARY_PATH="$bundle/lib:$work/deps$(printf ':%s' "${libdirs[@]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export HORARUN=$horarun PYTHON=$python PYTHONPATH=$pythonpath PYTHONUNBUFFERED=1
export here bundle work horarun bench python

# --- Versions and the device -----------------------------------------------------------------
{
  echo "# hora GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || cat "$bundle/commit" 2>/dev/null)"
  echo "- mode: $([ "$local_mode" = 1 ] && echo "--local ($bin)" || echo "bundle (.gpu/)")"
  echo "- host: $(uname -srm), $(nproc) cores"
  if command -v nvidia-smi >/dev/null; then
    echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -4 | paste -sd ';')"
  else
    echo "- GPU: none (no nvidia-smi)"
  fi
  echo "- nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | sed -n 's/.*release //p' | head -1)"
  echo "- python/torch: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda, "GPU", torch.cuda.is_available(), "NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")' 2>&1 | tail -1)"
  echo "- libhora's NCCL: $("$python" - <<'EOF' 2>&1 | tail -1
import ctypes
try:
    lib = ctypes.CDLL('libnccl.so.2')
    v = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(v))
    print('%d.%d.%d' % (v.value // 10000, v.value // 100 % 100, v.value % 100))
except OSError as e:
    print('not loadable:', e)
EOF
)"
  echo "- libhora resolves: $(ldd "$([ "$local_mode" = 1 ] && echo "$here/build/runtime/libhora.so" || echo "$bundle/lib/libhora.so.0")" 2>&1 | awk '/nccl|cudart|not found/ {print $1, $3}' | paste -sd ',')"
  echo
  echo "| check | result | time |"
  echo "|---|---|---|"
} >"$report"
cat "$report"
SECONDS=0

# --- hora.torch's extension, built against this machine's torch (bundle mode) --------------
if [ "$local_mode" = 0 ]; then
  build_ext() {
    mkdir -p "$work/python" || return 1
    cp -r python/hora "$work/python/" && find "$work/python" -name meson.build -delete
    local flags
    flags=$("$python" - <<'EOF'
import os, sysconfig, torch
t = os.path.dirname(torch.__file__)
print(sysconfig.get_paths()['include'], t, int(torch._C._GLIBCXX_USE_CXX11_ABI),
      sysconfig.get_config_var('EXT_SUFFIX'))
EOF
    ) || return 1
    read -r pyinc tdir abi suffix <<<"$flags"
    echo "python include $pyinc, torch $tdir, CXX11 ABI $abi"
    "${CXX:-c++}" -O2 "-std=${HORA_TORCH_CXX_STD:-c++20}" -shared -fPIC -w "-D_GLIBCXX_USE_CXX11_ABI=$abi" \
      -DTORCH_EXTENSION_NAME=_hora_torch -I"$bundle/include" -isystem "$pyinc" \
      -isystem "$tdir/include" -isystem "$tdir/include/torch/csrc/api/include" \
      python/src/torch_ops.cc -o "$work/python/hora/torch/_hora_torch$suffix" \
      -L"$bundle/lib" -L"$bundle/deps" -Wl,--no-as-needed -lhora -l:libgloo.so.0 \
      -L"$tdir/lib" -ltorch -ltorch_cpu -lc10 -ltorch_python \
      -Wl,-rpath,"$bundle/lib" -Wl,--version-script=python/src/torch_ops.map || return 1
    # Nothing but the module's init may be exported (python/src/torch_ops.map).
    nm -D --defined-only "$work"/python/hora/torch/_hora_torch*.so
    readelf -d "$work"/python/hora/torch/_hora_torch*.so | grep NEEDED
    "$python" -c 'import hora.torch as hvd; print("hora.torch imports; nccl_built:", hvd.nccl_built())'
  }
  export -f build_ext
  export REQUIRE_HORA_TORCH=1
  run_check "hora.torch extension (c++ against this torch)" 180 build_ext
fi

# --- The checks ------------------------------------------------------------------------------
for t in select_device_test unique_id_test cuda_api_test nccl_gpu_test; do
  run_check "test/runtime/nccl $t" 120 "$gpu_tests/$t"
done

bench_table() {  # NAME NP ARGS...: a bench run whose table also goes into the report
  set -o pipefail
  local name=$1 np=$2
  shift 2
  "$horarun" -np "$np" "$bench" "$@" | sed "s/^\[0\]<stdout>://" | tee "$work/$name.table"
}
export -f bench_table
run_check "allreduce_bench --device cuda -np 1 (NCCL)" 90 \
  bench_table gpu1 1 --device cuda --collective allreduce -b 1K -e 256M -f 4
run_check "allreduce_bench --device cpu -np 1" 90 \
  bench_table cpu1 1 --collective allreduce -b 1K -e 64M -f 4
run_check "allreduce_bench --device cpu -np 2" 90 \
  bench_table cpu2 2 --collective allreduce -b 1K -e 64M -f 4
run_check "allreduce_bench --device cuda -np 1, every collective" 90 \
  bench_table gpu1all 1 --device cuda --collective all -b 4K -e 16M -f 16

run_check "bench/torch_cuda_bench.py -np 1: hora.torch vs torch.distributed nccl" 120 \
  bash -c 'set -o pipefail; "$HORARUN" -np 1 "$PYTHON" bench/torch_cuda_bench.py |
    sed "s/^\[0\]<stdout>://" | tee "$work/torch.table"'

pytest_gpu() {  # NP FILE...: test/python's runner, skipped (77) where torch sees no GPU
  NEEDS_GPU=1 PYTEST_ADDOPTS="-rs --tb=short" test/python/run_pytest.sh "$@"
}
export -f pytest_gpu
run_check "hora.torch CUDA -np 1 (default path)" 180 \
  pytest_gpu 1 test_cuda.py test_sync_batch_norm.py
run_check "hora.torch CUDA -np 2 on one GPU (HORA_GPU_OPERATIONS=host)" 180 \
  env HORA_GPU_OPERATIONS=host bash -c 'pytest_gpu 2 test_cuda.py test_sync_batch_norm.py'
run_check "hora.torch CUDA jobs set up wrong (hora's errors)" 180 \
  pytest_gpu 0 test_cuda_jobs.py

# Repeated short two-rank jobs on the one GPU through the host path (an allreduce, allgather and
# broadcast of CUDA tensors, then exit without shutdown; every other job with shutdown, every
# other pair without RTLD_DEEPBIND), three at a time: each must exit 0. A rank that crashes
# prints libhora's crash report (its thread and native stack) into checks.log, with the names
# addr2line finds for its frames.
repeat_jobs() {
  local n=$1 i j rc crashed=0
  if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "torch sees no GPU"
    return 77
  fi
  mkdir -p "$work/jobs"
  cat >"$work/jobs/prog.py" <<'PY'
import os, sys, torch
import hora.torch as hvd
hvd.init()
dev = torch.device('cuda', 0)
x = torch.full((1000,), float(hvd.rank() + 1), device=dev)
s = hvd.allreduce(x, op=hvd.Sum, name='s')
g = hvd.allgather(x[:10], name='g')
b = hvd.broadcast(x, root_rank=0, name='b')
assert s.device == dev and s[0].item() == hvd.size() * (hvd.size() + 1) / 2
assert g.shape[0] == 10 * hvd.size() and b[0].item() == 1.0
print('rank', hvd.rank(), 'ok')
if os.environ.get('SHUTDOWN') == '1':
    hvd.shutdown()
PY
  for ((i = 0; i < n; i += 3)); do
    for j in 0 1 2; do
      [ $((i + j)) -lt "$n" ] || continue
      (
        k=$((i + j))
        HORA_GPU_OPERATIONS=host SHUTDOWN=$((k % 2)) HORA_TORCH_DEEPBIND=$(((k / 2) % 2)) \
          timeout -k 5 90 "$HORARUN" -np 2 "$PYTHON" "$work/jobs/prog.py" >"$work/jobs/$k.out" 2>&1
        echo $? >"$work/jobs/$k.rc"
      ) &
    done
    wait
  done
  for ((i = 0; i < n; i++)); do
    rc=$(cat "$work/jobs/$i.rc")
    echo "job $i (SHUTDOWN=$((i % 2)) HORA_TORCH_DEEPBIND=$(((i / 2) % 2))): exit $rc"
    if [ "$rc" != 0 ]; then
      crashed=$((crashed + 1))
      sed "s/^/  job $i: /" "$work/jobs/$i.out"
    fi
  done
  # The crash reports' frames lib(+0xOFFSET), with the names addr2line finds there.
  cat "$work"/jobs/*.out | "$PYTHON" -c '
import re, subprocess, sys
seen = set()
for m in re.finditer(r"([^\s\[\]:]+)\(\+(0x[0-9a-f]+)\)", sys.stdin.read()):
    if m.group(0) in seen:
        continue
    seen.add(m.group(0))
    try:
        name = subprocess.run(["addr2line", "-f", "-C", "-e", m.group(1), m.group(2)],
                              capture_output=True, text=True, timeout=20).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError) as e:
        name = "(addr2line: %s)" % e
    print("frame", m.group(0), "=", name)
'
  echo "$crashed of $n jobs failed"
  [ "$crashed" = 0 ]
}
export -f repeat_jobs
repeats=${GPU_CHECK_REPEAT:-$([ "$local_mode" = 1 ] && echo 2 || echo 24)}
run_check "hora.torch CUDA -np 2 on one GPU (host path), $repeats short jobs" 240 \
  repeat_jobs "$repeats"

# --- The report ------------------------------------------------------------------------------
{
  for t in gpu1 cpu1 cpu2 gpu1all torch; do
    [ -s "$work/$t.table" ] || continue
    echo
    echo "### allreduce_bench: $t"
    echo
    echo '```'
    cat "$work/$t.table"
    echo '```'
  done
  echo
  echo "$failed check(s) failed; the output of every check is in checks.log."
} >>"$report"
sed -n '/^| check/,/^###/p' "$report"
[ "$failed" = 0 ]
