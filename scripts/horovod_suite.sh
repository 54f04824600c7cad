#!/usr/bin/env bash
# Runs Horovod's own PyTorch test files against hora.torch, and against a real Horovod 0.28.1
# when ../shared/horovod has its archive, the way Horovod's CI runs them: one job per file (every
# test of the file in one job, so one rank's error that leaves the ranks out of step shows up as
# the failures after it), and prints passed/failed/skipped per file and per implementation.
#
#   scripts/horovod_suite.sh HOROVOD_SRC [NP] [FILE...]
#
# HOROVOD_SRC: a Horovod checkout (its test/ folder is used as it is) or a git mirror of Horovod
# (test/ of HOROVOD_REF, default v0.28.1, is exported to a temporary folder). NP: ranks per job
# (default 2). FILE: files of Horovod's test/parallel (check_paths: ignore, Horovod's path)
# (default: test_torch.py test_timeline.py).
#
# hora.torch runs under horarun with a temporary `horovod` package on PYTHONPATH that only maps
# module names (horovod.X is hora.X, the same module object); nothing of Horovod's is copied
# into this repository. Real Horovod runs under its own launcher (`horovodrun --gloo`).
#
# Environment: HORARUN (default build/cli/horarun), PYTHON (default /usr/bin/python3),
# PYTHONPATH (must import hora.torch; default build/python), HOROVOD_ARCHIVE (default
# ../shared/horovod/horovod-0.28.1-torch1.13-cpu-gloo.tar.xz), IMPLS ("hora horovod", or one of
# them), PYTEST_ARGS (more pytest arguments, e.g. "-k allgather"), JOB_TIMEOUT (seconds per
# job, default 1800), KEEP (1: keep the temporary folder and print its path; it holds each
# job's log and per-rank JUnit files).
# Exit: 0 when every test that passed on real Horovod (when it ran) passed on hora.torch and
# hora.torch had no failure; 1 otherwise; 77 when HOROVOD_SRC is missing or hora.torch or
# pytest cannot be imported.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-}
np=${2:-2}
shift 2 2>/dev/null || shift $#
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(test_torch.py test_timeline.py)
py=${PYTHON:-/usr/bin/python3}
horarun=${HORARUN:-$here/build/cli/horarun}
export PYTHONPATH=${PYTHONPATH:-$here/build/python}
archive=${HOROVOD_ARCHIVE:-$here/../shared/horovod/horovod-0.28.1-torch1.13-cpu-gloo.tar.xz}
impls=${IMPLS:-hora horovod}
job_timeout=${JOB_TIMEOUT:-1800}

if [ -z "$src" ] || [ ! -e "$src" ]; then
  echo "skipped: no Horovod sources (usage: $0 HOROVOD_SRC [NP] [FILE...])" >&2
  exit 77
fi
if ! "$py" -c 'import hora.torch, pytest' >/dev/null 2>&1; then
  echo "skipped: $py cannot import hora.torch and pytest (PYTHONPATH=$PYTHONPATH)" >&2
  exit 77
fi

work=$(mktemp -d /tmp/horovod_suite.XXXXXX)
cleanup() { [ "${KEEP:-0}" = 1 ] && echo "kept $work" >&2 || rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# Horovod's test/ folder: the checkout's, or exported from the mirror.
if [ -d "$src/test/parallel" ]; then
  tests=$src/test
else
  hvd_dirs='test/parallel test/utils'  # check_paths: ignore (Horovod's folders)
  # shellcheck disable=SC2086
  git -C "$src" archive "${HOROVOD_REF:-v0.28.1}" $hvd_dirs \
    | tar -x -C "$work" || { echo "$0: cannot export test/ from $src" >&2; exit 1; }
  tests=$work/test
fi

# The name map: `import horovod.torch` gives the module object hora.torch (not a second copy),
# and so for horovod.common.exceptions and horovod.common.elastic. Horovod's common.py (check_paths: ignore)
# also imports horovod.runner.util.threads.in_thread and test_timeline.py
# horovod.common.util.env: two small test helpers, written here (not Horovod's code).
mkdir -p "$work/shim/horovod/common" "$work/shim/horovod/runner/util"
cat > "$work/shim/horovod/__init__.py" <<'PY'
"""horovod.torch and horovod.common.{exceptions,elastic} are hora's modules
(scripts/horovod_suite.sh): a finder answers those imports with the hora module itself."""
import importlib
import importlib.abc
import importlib.util
import sys

_ALIASED = ('horovod.torch', 'horovod.common.exceptions', 'horovod.common.elastic')


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if not any(fullname == a or fullname.startswith(a + '.') for a in _ALIASED):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module('hora' + spec.name[len('horovod'):])

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())
PY
touch "$work/shim/horovod/common/__init__.py" "$work/shim/horovod/runner/__init__.py" \
  "$work/shim/horovod/runner/util/__init__.py"
cat > "$work/shim/horovod/common/util.py" <<'PY'
import contextlib
import os


@contextlib.contextmanager
def env(**kwargs):
    """Sets the environment variables given (None: left alone) and restores them afterwards."""
    saved = {k: os.environ.get(k) for k, v in kwargs.items() if v is not None}
    os.environ.update({k: str(v) for k, v in kwargs.items() if v is not None})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
PY
cat > "$work/shim/horovod/runner/util/threads.py" <<'PY'
import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs target(*args) in a started thread and returns the thread."""
    def run():
        try:
            target(*args)
        except Exception:
            if not silent:
                raise
    thread = threading.Thread(target=run, name=name, daemon=daemon)
    thread.start()
    return thread
PY
# Horovod's test utilities (check_paths: ignore) import `mock`, the PyPI backport of unittest.mock: where it is
# not installed, the standard library's stands in (both implementations get it).
mkdir -p "$work/extra"
if ! "$py" -c 'import mock' >/dev/null 2>&1; then
  printf 'import sys\nimport unittest.mock\nsys.modules[__name__] = unittest.mock\n' \
    > "$work/extra/mock.py"
fi

hvd_site=
if [[ " $impls " == *" horovod "* ]] && [ -f "$archive" ]; then
  mkdir -p "$work/hvd" && tar -xJf "$archive" -C "$work/hvd" && hvd_site=$work/hvd/site
fi

# One job: every test of FILE on NP ranks; each rank writes a JUnit file.
run_job() {  # impl file
  local impl=$1 file=$2 out=$work/$1.${2%.py}
  mkdir -p "$out"
  local pytest=("$py" -m pytest -v -p no:cacheprovider --continue-on-collection-errors
                -o junit_family=xunit1 ${PYTEST_ARGS:-} "$file")
  local rank_junit='--junit-xml='"$out"'/junit.$HOROVOD_RANK.xml'
  (
    cd "$tests/parallel" || exit 1
    export PYTHONDONTWRITEBYTECODE=1
    if [ "$impl" = hora ]; then
      PYTHONPATH=$work/shim:$work/extra:$PYTHONPATH timeout -k 10 "$job_timeout" \
        "$horarun" -np "$np" bash -c 'exec "$@" '"$rank_junit" _ "${pytest[@]}"
    else
      PYTHONPATH=$hvd_site:$work/extra timeout -k 10 "$job_timeout" \
        "$py" -m horovod.runner.launch -np "$np" -H "localhost:$np" --gloo \
        bash -c 'exec "$@" '"$rank_junit" _ "${pytest[@]}"
    fi
  ) > "$out/log" 2>&1
  echo $? > "$out/rc"
}

# "passed failed skipped" over every rank's JUnit file (a test counts as failed when it failed
# on any rank, skipped when skipped on rank 0), and the names of the failed tests.
count() {  # dir
  "$py" - "$1" <<'EOF'
import glob, os, sys
import xml.etree.ElementTree as ET
state = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], 'junit.*.xml'))):
    for case in ET.parse(path).iter('testcase'):
        key = case.get('name')
        tags = {c.tag for c in case}
        s = 'failed' if tags & {'failure', 'error'} else 'skipped' if 'skipped' in tags else 'passed'
        if state.get(key) != 'failed' and (key not in state or s == 'failed'):
            state[key] = s
with open(os.path.join(sys.argv[1], 'states'), 'w') as f:
    for k in sorted(state):
        f.write('%s %s\n' % (k, state[k]))
print(*[sum(1 for s in state.values() if s == w) for w in ('passed', 'failed', 'skipped')])
EOF
}

status=0
declare -A result
for file in "${files[@]}"; do
  for impl in $impls; do
    [ "$impl" = horovod ] && [ -z "$hvd_site" ] && continue
    start=$SECONDS
    run_job "$impl" "$file"
    out=$work/$impl.${file%.py}
    read -r p f s < <(count "$out")
    result[$impl.$file]="$p $f $s rc=$(cat "$out/rc") $((SECONDS - start))s"
    if [ "$impl" = hora ] && [ "$f" != 0 ]; then status=1; fi
    if [ "$impl" = hora ] && [ "$p$f$s" = 000 ]; then status=1; tail -20 "$out/log" >&2; fi
  done
  if [ -n "$hvd_site" ] && [ -f "$work/horovod.${file%.py}/states" ]; then
    # Every test that passed on real Horovod must pass on hora.torch.
    missing=$(LC_ALL=C join <(awk '$2 == "passed" {print $1}' "$work/horovod.${file%.py}/states") \
                   <(awk '$2 != "passed" {print $1}' "$work/hora.${file%.py}/states" 2>/dev/null))
    if [ -n "$missing" ]; then
      status=1
      echo "$file: passed on Horovod, not on hora.torch: $(echo $missing)" >&2
    fi
  fi
  for impl in $impls; do
    [ -f "$work/$impl.${file%.py}/states" ] || continue
    failed=$(awk '$2 == "failed" {print $1}' "$work/$impl.${file%.py}/states")
    [ -n "$failed" ] && echo "$file: failed on $impl: $(echo $failed)" >&2
  done
done

printf '\n%-20s %-9s %6s %6s %7s  %s\n' file impl passed failed skipped "job (exit, time)"
for file in "${files[@]}"; do
  for impl in $impls; do
    [ -n "${result[$impl.$file]:-}" ] || continue
    read -r p f s rc t <<< "${result[$impl.$file]}"
    printf '%-20s %-9s %6s %6s %7s  %s %s\n' "$file" "$impl" "$p" "$f" "$s" "$rc" "$t"
  done
done
echo "np=$np"
exit $status
