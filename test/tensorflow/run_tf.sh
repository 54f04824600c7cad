#!/usr/bin/env bash
# Runs hora.tensorflow/hora.keras test files: `run_tf.sh NP FILE...`, each file under
# `horarun -np NP` (every rank runs the same tests), or as one plain process with NP 0.
# Exit 77 (skipped, saying why) when the TensorFlow venv is absent (scripts/venv.sh tf makes it)
# or hora.tensorflow was not built into PYTHONPATH.
# Environment (test/tensorflow/meson.build sets it): TF_PYTHON, PYTHONPATH, HORARUN.
set -u
np=$1
shift
py=${TF_PYTHON:-}
if [ -z "$py" ] || [ "$py" = "not found" ] || [ ! -x "$py" ]; then
  echo "skipped: no TensorFlow venv (run scripts/venv.sh tf, or scripts/setup.sh, then reconfigure: meson setup --reconfigure build)" >&2
  exit 77
fi
if ! "$py" -c 'import hora.tensorflow' >/dev/null 2>&1; then
  echo "skipped: hora.tensorflow is not importable by $py with PYTHONPATH=${PYTHONPATH:-}:" >&2
  "$py" -c 'import hora.tensorflow' 2>&1 | tail -3 >&2
  exit 77
fi
cd "$(dirname "$0")" || exit 1
export PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
for f in "$@"; do
  echo "== $f at -np $np"
  if [ "$np" = 0 ]; then
    timeout 600 "$py" "$f"
  else
    # Importing TensorFlow takes over 30 s (horarun's default --start-timeout) on a loaded
    # 2-core machine: a rank then missed the rendezvous (tensorflow_adasum_np2 did at load 13).
    timeout 600 "$HORARUN" --start-timeout 180 -np "$np" "$py" "$f"
  fi
  rc=$?
  [ "$rc" = 0 ] || exit "$rc"
done
