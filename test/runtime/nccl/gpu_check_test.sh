#!/usr/bin/env bash
# scripts/gpu_check.sh --local on this build: the script runs every check, writes its report with
# one row per check and the bench tables, and ends 0 with no check failed. Without a GPU the
# checks that need one must say SKIP (not PASS, not FAIL); with one they must PASS.
# Environment (test/meson.build): HORA_BUILD_DIR, PYTHON, PYTHONPATH, HORARUN.
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$(mktemp -d /tmp/hora-gpu-check-test.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$root/scripts/gpu_check.sh" --local "$out"
rc=$?
fail() {
  echo "FAIL: $*" >&2
  cat "$out/report.md" >&2
  exit 1
}
[ "$rc" = 0 ] || fail "gpu_check.sh --local exited $rc"
report=$out/report.md
[ -s "$out/checks.log" ] || fail "no checks.log"
rows=$(grep -c '^| test/runtime/nccl \|^| allreduce_bench \|^| hora.torch ' "$report")
[ "$rows" = 12 ] || fail "expected 12 check rows in report.md, found $rows"
grep -q '^| test/runtime/nccl cuda_api_test | PASS ' "$report" || fail "cuda_api_test did not pass"
grep -q '^| allreduce_bench --device cpu -np 2 | PASS ' "$report" || fail "CPU bench did not pass"
grep -q '^### allreduce_bench: cpu2' "$report" || fail "the CPU -np 2 table is missing"
grep -q 'float32 *sum' "$report" || fail "the bench table has no float32 sum rows"
if nvidia-smi -L >/dev/null 2>&1; then want=PASS; else want=SKIP; fi
for check in 'test/runtime/nccl nccl_gpu_test' 'allreduce_bench --device cuda -np 1 (NCCL)' \
  'hora.torch CUDA -np 1 (default path)' 'hora.torch CUDA -np 2 on one GPU (host path), 2 short jobs'; do
  grep -qF "| $check | $want " "$report" || fail "'$check' is not $want"
done
echo "gpu_check.sh --local: $rows checks, GPU checks $want"
