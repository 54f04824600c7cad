#!/usr/bin/env bash
# Runs hora.mxnet's tests: `run_mx.sh NP FILE` under horarun -np NP with the MXNet venv's python
# (scripts/venv.sh mxnet makes it, with the pins of scripts/venvs/mxnet.txt). Exit 77 (skipped,
# saying why) when the venv cannot be made or hora.mxnet was not built into PYTHONPATH.
# Environment (test/mxnet/meson.build sets it): PYTHONPATH, HORARUN, SOURCE_ROOT.
set -u
np=$1
file=$2
if ! py_dir=$(bash "$SOURCE_ROOT/scripts/venv.sh" mxnet 2>"${TMPDIR:-/tmp}/hora-mx-venv.$$"); then
  echo "skipped: the MXNet venv cannot be made (scripts/venv.sh mxnet):" >&2
  tail -5 "${TMPDIR:-/tmp}/hora-mx-venv.$$" >&2
  rm -f "${TMPDIR:-/tmp}/hora-mx-venv.$$"
  exit 77
fi
rm -f "${TMPDIR:-/tmp}/hora-mx-venv.$$"
py=$py_dir/bin/python
if ! "$py" -c 'import hora.mxnet' >/dev/null 2>&1; then
  echo "skipped: hora.mxnet is not importable by $py with PYTHONPATH=${PYTHONPATH:-}:" >&2
  "$py" -c 'import hora.mxnet' 2>&1 | tail -3 >&2
  exit 77
fi
cd "$(dirname "$0")" || exit 1
export PYTHONDONTWRITEBYTECODE=1
echo "== $file at -np $np"
timeout 300 "$HORARUN" --start-timeout 120 -np "$np" "$py" "$file"
