#!/usr/bin/env bash
# Runs Horovod's own PyTorch test files against hora.torch, and against a real Horovod 0.28.1
# when ../shared/horovod has its archive, the way Horovod's CI runs them: one job per file (every
# test of the file in one job, so one rank's error that leaves the ranks out of step shows up as
# the failures after it), and prints passed/failed/skipped per file and per implementation.
#
#   scripts/horovod_suite.sh [HOROVOD_SRC] [NP] [FILE...]
#
# HOROVOD_SRC (the argument, else the variable, else ../.mirror/horovod+horovod/repo beside the
# repository): a Horovod checkout (its test/ folder is used as it is) or a git mirror of Horovod
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
# job, default 1800), STEP_SECONDS (how long the ranks wait for each other after each test,
# default 60, below), KEEP (1: keep the temporary folder and print its path; it holds each
# job's log and per-rank JUnit files).
# Exit: 0 when every test that passed on real Horovod (when it ran) passed on hora.torch and
# hora.torch had no failure; 1 otherwise; 77 when HOROVOD_SRC is missing or hora.torch or
# pytest cannot be imported.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
src=${HOROVOD_SRC:-$here/../.mirror/horovod+horovod/repo}
if [ $# -gt 0 ] && [[ ! "$1" =~ ^[0-9]+$ ]]; then src=$1; shift; fi  # else NP comes first
np=${1:-2}
shift 2>/dev/null
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(test_torch.py test_timeline.py)
py=${PYTHON:-/usr/bin/python3}
horarun=${HORARUN:-$here/build/cli/horarun}
export PYTHONPATH=${PYTHONPATH:-$here/build/python}
archive=${HOROVOD_ARCHIVE:-$here/../shared/horovod/horovod-0.28.1-torch1.13-cpu-gloo.tar.xz}
impls=${IMPLS:-hora horovod}
job_timeout=${JOB_TIMEOUT:-1800}

if [ ! -e "$src" ]; then
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
# and so for horovod.common.exceptions and horovod.common.elastic. Horovod's test utilities
# (common.py) also import horovod.runner.util.threads.in_thread and test_timeline.py
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
# Horovod's test utilities import `mock`, the PyPI backport of unittest.mock: where it is
# not installed, the standard library's stands in (both implementations get it).
mkdir -p "$work/extra"
if ! "$py" -c 'import mock' >/dev/null 2>&1; then
  printf 'import sys\nimport unittest.mock\nsys.modules[__name__] = unittest.mock\n' \
    > "$work/extra/mock.py"
fi

# After each test every rank waits until all ranks have finished it (at most STEP_SECONDS,
# default 60; 0: no wait). A test that fails on some ranks only (an assertion on the rank's own
# share of a result, e.g. test_horovod_reducescatter_prescale at -np 3, whose float16 check
# fails on ranks 0 and 2 and passes on rank 1) leaves the ranks out of step: the ranks that
# failed start the next test while the others wait in the failed test's next collective, and
# every test after it fails on both implementations (real Horovod stalls there). Then the ranks
# that waited in vain end the job (exit 3, "out of step" in the log) and the next job starts at
# the test after it, as after a crash. Both implementations run with this plugin alike.
cat > "$work/extra/hvd_suite_steps.py" <<'PY'
"""pytest plugin of scripts/horovod_suite.sh: every rank waits after each test until all ranks
have finished it; when they have not within STEP_SECONDS, the ranks are out of step and this
rank ends the job."""
import os
import sys
import time

import pytest

_DIR = os.environ.get('HVD_SUITE_STEPS_DIR')
_LIMIT = float(os.environ.get('STEP_SECONDS', '60'))
_RANK = int(os.environ.get('HOROVOD_RANK', '0'))
_SIZE = int(os.environ.get('HOROVOD_SIZE', '1'))


def _mark(nodeid, rank):
    return os.path.join(_DIR, '%s.%d' % (nodeid.replace('/', '_').replace(':', '_'), rank))


def pytest_runtest_logreport(report):
    # pytest prints failures at the end of the session, which a job ended out of step never
    # reaches: print each one as it happens.
    if report.failed:
        print('\nhorovod_suite: %s failed on rank %d (%s):\n%s'
              % (report.nodeid, _RANK, report.when, report.longreprtext), flush=True)


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location):
    if not _DIR or _LIMIT <= 0 or _SIZE < 2:
        return
    open(_mark(nodeid, _RANK), 'w').close()
    deadline = time.time() + _LIMIT
    while time.time() < deadline:
        if all(os.path.exists(_mark(nodeid, r)) for r in range(_SIZE)):
            return
        time.sleep(0.05)
    missing = [r for r in range(_SIZE) if not os.path.exists(_mark(nodeid, r))]
    print('\nhorovod_suite: out of step: rank(s) %s did not finish %s within %g s of rank %d; '
          'ending the job' % (missing, nodeid, _LIMIT, _RANK), flush=True)
    sys.stderr.flush()
    os._exit(3)
PY

hvd_site=
if [[ " $impls " == *" horovod "* ]] && [ -f "$archive" ]; then
  mkdir -p "$work/hvd" && tar -xJf "$archive" -C "$work/hvd" && hvd_site=$work/hvd/site
fi

# A job: the tests of FILE on NP ranks, as Horovod's CI runs them (pytest -v, every test in one
# process per rank). When a job dies (a rank crashed, or JOB_TIMEOUT), the test it was running
# counts as failed ("crashed") and another job runs the tests not yet reported (at most
# MAX_JOBS, default 10, jobs per file), so one crash costs one test, not the rest of the file.
# A test's id comes from `pytest --collect-only` (sorted as comm needs, in the C locale).
run_file() {  # impl file
  local impl=$1 file=$2 out=$work/$1.${2%.py} job=0 path
  mkdir -p "$out"
  : > "$out/reported"
  [ "$impl" = hora ] && path=$work/shim:$work/extra:$PYTHONPATH || path=$hvd_site:$work/extra
  # Every test's id, to name the ones a resumed job runs (pytest's --deselect takes prefixes).
  (cd "$tests/parallel" && PYTHONPATH=$path "$py" -m pytest -q --collect-only \
     -p no:cacheprovider ${PYTEST_ARGS:-} "$file" 2>/dev/null) | grep '::' \
    | LC_ALL=C sort > "$out/all"
  while [ "$job" -lt "${MAX_JOBS:-10}" ]; do
    job=$((job + 1))
    local pytest=("$py" -m pytest -v -p no:cacheprovider -p hvd_suite_steps
                  --continue-on-collection-errors ${PYTEST_ARGS:-})
    if [ "$job" = 1 ]; then
      pytest+=("$file")
    else
      mapfile -t rest < <(LC_ALL=C comm -23 "$out/all" "$out/reported")
      [ ${#rest[@]} -gt 0 ] || { job=$((job - 1)); break; }
      pytest+=("${rest[@]}")
    fi
    (
      cd "$tests/parallel" || exit 1
      export PYTHONDONTWRITEBYTECODE=1
      export HVD_SUITE_STEPS_DIR=$out/steps.$job
      mkdir -p "$HVD_SUITE_STEPS_DIR"
      if [ "$impl" = hora ]; then
        PYTHONPATH=$path timeout -k 10 "$job_timeout" "$horarun" -np "$np" "${pytest[@]}"
      else
        PYTHONPATH=$path timeout -k 10 "$job_timeout" \
          "$py" -m horovod.runner.launch -np "$np" -H "localhost:$np" --gloo "${pytest[@]}"
      fi
    ) > "$out/log.$job" 2>&1
    echo $? > "$out/rc.$job"
    # Done when the job ended with pytest's summary, or when it ran nothing new.
    grep -Eq '^\[0\]<stdout>:=+ .*(passed|failed|skipped|error).* in [0-9.]+s' \
      "$out/log.$job" && break
    local before
    before=$(wc -l < "$out/reported")
    tally "$out" > /dev/null  # writes OUT/reported: every test reported so far
    [ "$(wc -l < "$out/reported")" -gt "$before" ] || break
  done
  echo "$job" > "$out/jobs"
}

# "passed failed skipped" from the ranks' `pytest -v` lines in every job's log: a test failed
# when it failed (or errored) on any rank or was running when its job died (crashed), skipped
# when rank 0 skipped it. Writes OUT/states: "test state" lines.
tally() {  # out
  "$py" - "$1" <<'PY'
import glob, os, re, sys
out = sys.argv[1]
line = re.compile(r'^\[(\d+)\]<stdout>:(\S+::\w+::(\w+)) ?(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)?')
sections = re.compile(r'^\[(\d+)\]<stdout>:=+ (warnings summary|short test summary info|FAILURES|'
                      r'ERRORS|PASSES) =+')
state, ids, crashed = {}, set(), []
for log in sorted(glob.glob(os.path.join(out, 'log.*')), key=lambda p: int(p.rsplit('.', 1)[1])):
    started, summary = {}, set()
    for text in open(log, errors='replace'):
        m = sections.match(text)
        if m:  # after the tests: ids listed there are not tests starting
            summary.add(int(m.group(1)))
            continue
        m = line.match(text)
        if not m or int(m.group(1)) in summary:
            continue
        rank, name, result = int(m.group(1)), m.group(3), m.group(4)
        ids.add(m.group(2))
        if result is None:
            started[rank] = name
            continue
        started.pop(rank, None)
        if result in ('FAILED', 'ERROR'):
            state[name] = 'failed'
        elif state.get(name) != 'failed':
            if result == 'SKIPPED' and (rank == 0 or name not in state):
                state[name] = 'skipped'
            elif name not in state:
                state[name] = 'passed'
    for name in sorted(set(started.values())):
        state[name] = 'failed'
        crashed.append('%s %s\n' % (name, os.path.basename(log)))
if crashed:
    with open(os.path.join(out, 'crashed'), 'w') as f:
        f.write(''.join(crashed))
elif os.path.exists(os.path.join(out, 'crashed')):
    os.unlink(os.path.join(out, 'crashed'))
with open(os.path.join(out, 'states'), 'w') as f:
    for k in sorted(state):
        f.write('%s %s\n' % (k, state[k]))
with open(os.path.join(out, 'reported'), 'w') as f:
    f.write(''.join(i + '\n' for i in sorted(ids)))
print(*[sum(1 for s in state.values() if s == w) for w in ('passed', 'failed', 'skipped')])
PY
}

status=0
declare -A result
for file in "${files[@]}"; do
  for impl in $impls; do
    [ "$impl" = horovod ] && [ -z "$hvd_site" ] && continue
    start=$SECONDS
    run_file "$impl" "$file"
    out=$work/$impl.${file%.py}
    read -r p f s < <(tally "$out")
    result[$impl.$file]="$p $f $s $(cat "$out/jobs") $((SECONDS - start))s"
    if [ "$impl" = hora ] && [ "$f" != 0 ]; then status=1; fi
    if [ "$impl" = hora ] && [ "$p$f$s" = 000 ]; then status=1; tail -20 "$out/log.1" >&2; fi
  done
  hv=$work/horovod.${file%.py}/states ho=$work/hora.${file%.py}/states
  if [ -n "$hvd_site" ] && [ -f "$hv" ]; then
    # Every test that passed on real Horovod must pass on hora.torch.
    missing=$(LC_ALL=C comm -23 <(awk '$2 == "passed" {print $1}' "$hv" | LC_ALL=C sort) \
                                <(awk '$2 == "passed" {print $1}' "$ho" 2>/dev/null | LC_ALL=C sort))
    if [ -n "$missing" ]; then
      status=1
      echo "$file: passed on Horovod, not on hora.torch: $(echo $missing)" >&2
    fi
  fi
  for impl in $impls; do
    out=$work/$impl.${file%.py}
    [ -f "$out/states" ] || continue
    failed=$(awk '$2 == "failed" {print $1}' "$out/states")
    [ -n "$failed" ] && echo "$file: failed on $impl: $(echo $failed)" >&2
    [ -f "$out/crashed" ] && echo "$file: crashed on $impl (test, job): $(sort -u "$out/crashed" | tr '\n' ' ')" >&2
    steps=$(grep -ho 'did not finish [^ ]*' "$out"/log.* 2>/dev/null | awk -F:: '{print $NF}' | sort -u)
    [ -n "$steps" ] && echo "$file: ranks out of step on $impl after: $(echo $steps)" >&2
  done
done

printf '\n%-18s %-8s %6s %6s %7s %5s %6s\n' file impl passed failed skipped jobs time
for file in "${files[@]}"; do
  for impl in $impls; do
    [ -n "${result[$impl.$file]:-}" ] || continue
    read -r p f s j t <<< "${result[$impl.$file]}"
    printf '%-18s %-8s %6s %6s %7s %5s %6s\n' "$file" "$impl" "$p" "$f" "$s" "$j" "$t"
  done
done
echo "np=$np"
exit $status
