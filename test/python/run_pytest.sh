#!/usr/bin/env bash
# Runs hora.torch's pytest files: `run_pytest.sh NP FILE...` under `horarun -np NP` (every rank
# runs the same tests, so their collectives match), or in one plain process with NP 0.
# Exit 77 (skipped) when hora.torch is not importable (built with -Dtorch=disabled, or no torch),
# and with NEEDS_GPU=1 also when torch sees no GPU. REQUIRE_HORA_TORCH=1 makes the first a
# failure (exit 1, with Python's error).
# Environment (test/python/meson.build sets it): PYTHON, PYTHONPATH (build/python), HORARUN.
set -u
np=$1
shift
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import hora.torch' >/dev/null 2>&1; then
  echo "skipped: hora.torch is not importable with PYTHONPATH=${PYTHONPATH:-}" >&2
  # scripts/gpu_check.sh built it: then not importing is a failure, not a skip.
  if [ "${REQUIRE_HORA_TORCH:-0}" = 1 ]; then "$py" -c "import hora.torch"; exit 1; fi
  exit 77
fi
if [ "${NEEDS_GPU:-0}" = 1 ] && ! "$py" -c 'import sys, torch
sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  echo "skipped: torch sees no GPU (torch.cuda.is_available() is false)" >&2
  exit 77
fi
cd "$(dirname "$0")" || exit 1
export PYTHONDONTWRITEBYTECODE=1
args=(-m pytest -q -p no:cacheprovider "$@")
if [ "$np" = 0 ]; then
  "$py" "${args[@]}"
else
  "$HORARUN" -np "$np" "$py" "${args[@]}"
fi
rc=$?
if [ "$rc" = 5 ]; then
  echo "run_pytest.sh: pytest collected no tests from $*" >&2
  exit 1
fi
exit "$rc"
