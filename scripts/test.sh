#!/usr/bin/env bash
# Every test, in this order:
#   1. scripts/format.sh --check: a file that differs from .clang-format fails the run at once;
#   2. build/ (with NCCL where CUDA and NCCL are found), then the whole suite in build/;
#   3. the AddressSanitizer + UndefinedBehaviorSanitizer build, build-asan/ (gcc, -O0, no NCCL),
#      and the suites in ASAN_SUITES under it; any sanitizer report fails its test. It is also
#      the CPU-only configuration (what machines without CUDA get): libhora without NCCL, the
#      examples and allreduce_bench must compile there, with warnings as errors under
#      HORA_WERROR=1. With HORA_ASAN=0, build-cpu/ (-Dnccl=disabled, optimized) checks that
#      instead.
#   4. the ThreadSanitizer build, build-tsan/ (clang, -O1, no NCCL), and the suites in
#      TSAN_SUITES under it; any data race, lock-order inversion or other report fails its test.
# The builds of steps 3 and 4 start beside step 2's suite, at the lowest CPU priority (below).
# Extra arguments go to every `meson test` run instead of the default selection (e.g.
# scripts/test.sh hosts_test).
#
# Environment:
#   HORA_WERROR=1   warnings are errors in build/, build-asan/ and build-cpu/ (.ci/run sets it)
#   HORA_ASAN=0     skip step 3 (e.g. for a quick local run); .ci/run always runs it
#   HORA_ASAN_SUITES="common rendezvous"   the suites step 3 runs (default: ASAN_SUITES below)
#   HORA_ASAN_TESTS="supervisor_test"      single tests step 3 runs besides (default: ASAN_TESTS)
#   HORA_TSAN=0     skip step 4, the ThreadSanitizer build (build-tsan/, clang) and its suites
#   HORA_TSAN_SUITES="engine shm"   the suites step 4 runs (default: TSAN_SUITES below)
#   HORA_PREBUILD=0 build steps 3 and 4 after the suite, not beside it
#   HORA_UNITY=1    configure new build dirs as unity builds (.ci/run sets it)
#   HORA_PREBUILD_FUZZ=1  also build scripts/fuzz.sh's harnesses beside the suite (.ci/run sets it)
set -euo pipefail
cd "$(dirname "$0")/.."

werror=false
if [ "${HORA_WERROR:-0}" = 1 ]; then werror=true; fi
# HORA_UNITY=1: a build dir made here compiles each target's sources 8 to a file (Meson's unity
# build), which parses the shared headers (Asio, spdlog, fmt) and instantiates their templates
# once per 8 sources: a third less CPU on the launcher's libraries, for a clean clone that builds
# everything once (.ci/run), build-tsan/ included. Not for a tree one edits (a change recompiles
# its whole batch), nor by default: a batch lends each source its neighbours' includes, so the
# file-by-file build/ of every local run is what checks that each source includes what it uses.
unity=()
if [ "${HORA_UNITY:-0}" = 1 ]; then unity=(-Dunity=on -Dunity_size=8); fi

# ---- what the sanitizer stages run (steps 3 and 4) ----
# The unit suites of every folder, as a 2-core CI machine can afford them within .ci/run's
# budget (CONTRIBUTING.md, "Time budget"). Not `integration` (whole jobs: 53 tests, about 5 min
# under ASan; the ThreadSanitizer stage runs them through an instrumented launcher and libhora),
# not `remote` (SSH test hosts in network namespaces: slow, and what it adds over `integration`
# is sshd's side), not `gpu` (NCCL is not in this build) and not `runtime` (multi-rank jobs in
# threads: its collectives test alone was minutes at -O0 under ASan; the ThreadSanitizer stage
# runs its whole-job cases, and `shm` and `engine` keep the data paths and the engine under
# ASan). HORA_ASAN_SUITES adds them back.
# Of `cli` (and not `network`), only the tests of the launcher's event-driven core run here: the
# supervisor and the rank processes (callbacks that outlive what they capture), the agent and its
# relay (frames, buffers, streams) and the line splitter. The rest of cli/ is parsers and
# decisions on values: its parsers are fuzzed under ASan (scripts/fuzz.sh: host lists, ssh_config,
# known_hosts, agent frames, guard requests), and each of those tests is another Catch2 program
# to compile at -O0 with instrumentation (about 25 of them: minutes of a 2-core CI machine).
# HORA_ASAN_TESTS changes the list; HORA_ASAN_SUITES="... cli network" brings all of them back.
read -r -a ASAN_SUITES <<<"${HORA_ASAN_SUITES:-common rendezvous ssh shm engine}"
read -r -a ASAN_TESTS <<<"${HORA_ASAN_TESTS-supervisor_test rank_processes_test agent_test relay_test agent_rank_process_test line_splitter_test agent_frame_test}"
# The suites where threads meet: the engine (its thread, threads that drive it, submitters), the
# rendezvous server and client (reader thread), shared memory (waits, abort from any thread) and
# whole jobs (Gloo's device thread). Not the horovod suite's cases in `integration` (Python and
# Horovod's own processes; the ASan stage runs them), nor the `wide` cases
# (test/integration/meson.build): a case the stage runs at 2 ranks again at 3, or at 128.
read -r -a TSAN_SUITES <<<"${HORA_TSAN_SUITES:-engine rendezvous shm integration}"
asan_selection=("$@")
tsan_selection=("$@")
if [ $# -eq 0 ]; then
  for s in "${ASAN_SUITES[@]}"; do asan_selection+=(--suite "$s"); done
  for s in "${TSAN_SUITES[@]}"; do tsan_selection+=(--suite "$s"); done
  tsan_selection+=(--no-suite horovod --no-suite wide)
fi

asan_setup() {
  [ -f build-asan/build.ninja ] && return 0
  # -O0: at -O2 the sanitizers' instrumentation made this build 3-4x the normal one's compile
  # time (172 job-minutes in .ninja_log, CONTRIBUTING.md "Time budget"); at -O0 it costs about
  # the normal build's. The tests wait on deadlines more than they compute, and the data
  # kernels (hora_kernels) keep their -O3.
  # -g1: line tables and function names only, which is what a sanitizer report prints (file,
  # line, function); full debug info (types, locals) was a tenth of this build's compile time.
  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dnccl=disabled \
    -Doptimization=0 -Dcpp_args=-g1 "-Dwerror=$werror" "${unity[@]}" >build-asan.setup.log 2>&1 ||
    { cat build-asan.setup.log >&2; return 1; }
  rm -f build-asan.setup.log
}
tsan_setup() {
  [ -f build-tsan/build.ninja ] && return 0
  # -gline-tables-only: clang's -g1 (see build-asan above).
  CXX=clang++ meson setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dnccl=disabled \
    -Dtorch=disabled -Doptimization=1 -Dcpp_args=-gline-tables-only "${unity[@]}" \
    >build-tsan.setup.log 2>&1 || { cat build-tsan.setup.log >&2; return 1; }
  rm -f build-tsan.setup.log
}
# build_for DIR SELECTION...: builds what `meson test -C DIR SELECTION...` would build first.
build_for() {
  local dir="$1" listed targets
  shift
  listed=$(python3 scripts/test_targets.py "$dir" "$@") || return 1
  [ -n "$listed" ] || return 0
  mapfile -t targets <<<"$listed"
  ninja -C "$dir" "${targets[@]}"
}

# The sanitizer builds for the run beside the suite (below): this script again, with
# HORA_PREBUILD_CHILD=1, in a session of its own. The kernel's autogroup scheduling (on by default
# in many distributions) shares the CPU between sessions first, and `meson test` starts each test
# in a session of its own: a nice value counts only against processes of the same session, so a
# prebuild in test.sh's session took half the cores from any test that wanted them
# (install_pip_test ran 419 s beside it, 182 s alone). Its own session at autogroup nice 19
# gives it only what the tests leave.
prebuild() {
  echo 19 >/proc/self/autogroup 2>/dev/null || true
  renice -n 19 -p "$$" >/dev/null
  ionice -c 3 -p "$$" 2>/dev/null || true
  if [ "${HORA_ASAN:-1}" != 0 ]; then
    asan_setup && meson compile -C build-asan hora fashion_mnist allreduce_bench &&
      build_for build-asan "${asan_selection[@]}" "${ASAN_TESTS[@]}"
  fi
  if [ "${HORA_TSAN:-1}" != 0 ]; then
    tsan_setup && build_for build-tsan "${tsan_selection[@]}"
  fi
  if [ "${HORA_PREBUILD_FUZZ:-0}" = 1 ]; then bash scripts/fuzz.sh build; fi
}
if [ "${HORA_PREBUILD_CHILD:-0}" = 1 ]; then
  prebuild
  exit
fi

bash scripts/setup.sh  # clang-format for the check below; build.sh runs it again (a no-op then)
bash scripts/format.sh --check
python3 scripts/check_paths.py
python3 scripts/check_docs.py
# No function over 120 lines in cli/, runtime/, rendezvous/, ssh/, common/ but the listed tables
# and state machines (prints the 10 longest).
python3 scripts/long_functions.py
# No import circle among hora's Python modules.
python3 scripts/check_imports.py
# The spark and ray suites run in the engines venv (pinned pyspark and ray from PyPI; made once
# per machine, then a no-op). Without PyPI they skip (77) rather than stop the run.
bash scripts/venv.sh engines >/dev/null ||
  echo "test.sh: could not make the engines venv; the spark and ray suites will skip" >&2
# hora.tensorflow and hora.keras build against the tf venv (pinned tensorflow-cpu and keras),
# which must exist before build/ is configured; without it they are left out and their suites
# (tensorflow, keras) skip.
bash scripts/venv.sh tf >/dev/null ||
  echo "test.sh: could not make the tf venv; the tensorflow and keras suites will skip" >&2

# An existing build dir keeps its options: set werror on it explicitly (a no-op when unchanged).
for dir in build build-cpu build-asan; do
  if [ -f "$dir/build.ninja" ]; then meson configure "$dir" "-Dwerror=$werror" >/dev/null; fi
done
bash scripts/build.sh build "-Dwerror=$werror" "${unity[@]}"
# Without the sanitizer stage, the CPU-only configuration is checked in a build of its own.
if [ "${HORA_ASAN:-1}" = 0 ]; then
  if [ ! -f build-cpu/build.ninja ]; then
    meson setup build-cpu -Dnccl=disabled -Dtests=disabled "-Dwerror=$werror" >/dev/null
  fi
  meson compile -C build-cpu hora fashion_mnist allreduce_bench >build-cpu.compile.log 2>&1 ||
    { cat build-cpu.compile.log >&2; exit 1; }
  rm -f build-cpu.compile.log
fi

# One plain line per run from its testlog.json, whatever the runner printed above it.
summarize() {
  python3 scripts/test_summary.py "$2" "$1/meson-logs/testlog.json" || true
}

# ---- the sanitizer builds, beside the suite ----
# The suite's tests mostly wait on deadlines, test hosts and login shells: on 2 cores, a third
# of its half hour is idle CPU. The sanitizer trees are built in that time, at the lowest CPU
# and I/O priority in a session of their own (prebuild() above: a compile job gets about 1/70 of
# a core that a test wants), so the suite runs as fast as alone and steps 3 and 4 start with
# their builds done or nearly. Any error of this build shows again, in full, when steps 3 and 4
# build in the foreground.
# HORA_PREBUILD=0 builds them after the suite instead (one thing at a time, e.g. to time a test).
prebuild_pid=""
# Every process started here is stopped when test.sh ends, however it ends.
kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
trap 'if [ -n "$prebuild_pid" ]; then kill_tree "$prebuild_pid"; fi' EXIT
if [ $# -eq 0 ] && [ "${HORA_PREBUILD:-1}" != 0 ] &&
  { [ "${HORA_ASAN:-1}" != 0 ] || [ "${HORA_TSAN:-1}" != 0 ]; }; then
  # setsid -w: the new session's leader may be a child of setsid, which then waits for it, so
  # kill_tree from $! reaches every process of the build.
  HORA_PREBUILD_CHILD=1 setsid -w bash scripts/test.sh >build-sanitizers.log 2>&1 &
  prebuild_pid=$!
fi

status=0
meson test -C build --print-errorlogs --num-processes 2 "$@" || status=$?
summarize build "suite"

if [ -n "$prebuild_pid" ]; then
  echo "test.sh: waiting for the sanitizer builds started beside the suite (build-sanitizers.log)"
  prebuild_rc=0
  wait "$prebuild_pid" || prebuild_rc=$?
  prebuild_pid=""
  if [ "$prebuild_rc" -eq 0 ]; then
    rm -f build-sanitizers.log
  else
    echo "test.sh: the sanitizer builds beside the suite failed; they run again below" >&2
  fi
fi

# ---- sanitizers ----
if [ "${HORA_ASAN:-1}" != 0 ]; then
  asan_setup || exit 1
  # The CPU-only configuration: the examples and the benchmark against libhora without NCCL.
  meson compile -C build-asan hora fashion_mnist allreduce_bench >build-asan.compile.log 2>&1 ||
    { cat build-asan.compile.log >&2; exit 1; }
  rm -f build-asan.compile.log
  # `meson test` builds what the selected tests need (not the gpu and remote tests, nor bench/).
  # Any report fails the test: ASan and UBSan stop the process at the first error, LeakSanitizer
  # reports at exit. scripts/lsan.supp lists the only leaks tolerated (inside third-party
  # libraries). Timeouts are raised: sanitized code runs 2-3x slower.
  asan_test() {
    ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0" \
      UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
      LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0" \
      meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3 "$@"
  }
  rc=0
  asan_test "${asan_selection[@]}" || rc=$?
  # The single tests: a second run (meson selects by suite or by name, not by either), with a
  # log of its own beside testlog.json.
  rm -f build-asan/meson-logs/asan-tests.json
  if [ $# -eq 0 ] && [ ${#ASAN_TESTS[@]} -gt 0 ]; then
    asan_test --logbase asan-tests "${ASAN_TESTS[@]}" || rc=$?
  fi
  python3 scripts/test_summary.py sanitizers build-asan/meson-logs/testlog.json \
    build-asan/meson-logs/asan-tests.json || true
  [ "$rc" -eq 0 ] || status=$rc
fi

# ---- ThreadSanitizer ----
# build-tsan/ is clang (which also checks the lock annotations of common/thread_annotations.h, as
# every clang build does), -O1, no NCCL, no hora.torch, and builds only what its suites need.
# scripts/tsan.supp may list races inside uninstrumented third-party libraries only, each with its
# reason.
if [ "${HORA_TSAN:-1}" != 0 ]; then
  tsan_setup || exit 1
  # Any report fails its test (halt_on_error; exit code 66 names TSan in the log). Timeouts are
  # raised: instrumented code runs 2-5x slower.
  rc=0
  TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp" \
    meson test -C build-tsan --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
    "${tsan_selection[@]}" || rc=$?
  summarize build-tsan "thread sanitizer"
  [ "$rc" -eq 0 ] || status=$rc
fi
exit "$status"
