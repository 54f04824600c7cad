#!/usr/bin/env bash
# Runs the libFuzzer harnesses in fuzz/ (clang, AddressSanitizer + UndefinedBehaviorSanitizer).
#
#   scripts/fuzz.sh NAME [SECONDS]   # one harness, default 300 s (names: scripts/fuzz.sh list)
#   scripts/fuzz.sh all SECONDS      # each harness for SECONDS, one after the other; .ci/run
#   scripts/fuzz.sh list             # the harness names
#   scripts/fuzz.sh build            # build every harness, run none (scripts/test.sh)
#
# Configures build-fuzz (FUZZ_BUILD_DIR) with clang if needed and builds only the harnesses.
# Each run starts from a copy of fuzz/corpus/NAME (the repo's seeds are never modified); new
# inputs go to that copy. Any crash, sanitizer report, leak, timeout (one input running longer
# than FUZZ_TIMEOUT seconds, default 10) or memory blow-up (more than FUZZ_RSS_MB, default 2048)
# fails the run; the input is saved under $FUZZ_BUILD_DIR/fuzz-artifacts/NAME/ and its path
# printed. Reproduce with: $FUZZ_BUILD_DIR/fuzz/NAME_fuzz PATH. Ends with a table of
# executions per second. FUZZ_JOBS=N (default 1) runs N harnesses at a time, each on a core of
# its own (.ci/run: 2, one per core of a 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."

HARNESSES=(wire host_list guard_request ssh_config known_hosts agent_frame)
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
TIMEOUT="${FUZZ_TIMEOUT:-10}"
RSS_MB="${FUZZ_RSS_MB:-2048}"

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  echo "harnesses: ${HARNESSES[*]}"
}

is_harness() {
  local h
  for h in "${HARNESSES[@]}"; do [ "$h" = "$1" ] && return 0; done
  return 1
}

build() {
  bash scripts/setup.sh
  if ! command -v clang++ >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: clang++ is missing (apt-get install clang)" >&2
    exit 1
  fi
  if [ ! -f "$BUILD/build.ninja" ]; then
    CXX=clang++ meson setup "$BUILD" -Dfuzzing=enabled -Db_sanitize=address,undefined \
      -Db_lundef=false -Dnccl=disabled -Dtests=disabled >"$BUILD.setup.log" 2>&1 ||
      { cat "$BUILD.setup.log" >&2; exit 1; }
    rm -f "$BUILD.setup.log"
  fi
  local targets=() h
  for h in "$@"; do targets+=("fuzz/${h}_fuzz"); done
  ninja -C "$BUILD" "${targets[@]}" >/dev/null
}

# run_one NAME SECONDS: fuzzes NAME for SECONDS; prints libFuzzer's tail and one summary line
# to $summary. Returns non-zero on any finding.
run_one() {
  local name="$1" seconds="$2"
  local work="$BUILD/fuzz-work/$name" artifacts="$BUILD/fuzz-artifacts/$name"
  local log="$BUILD/fuzz-work/$name.log"
  rm -rf "$work" "$artifacts"  # a previous run's findings would be listed as this one's
  mkdir -p "$work" "$artifacts"
  cp fuzz/corpus/"$name"/* "$work"/ 2>/dev/null || true
  rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*
  echo "==== fuzz $name for ${seconds}s (corpus copy: $work) ===="
  local rc=0
  ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    "$BUILD/fuzz/${name}_fuzz" -max_total_time="$seconds" -timeout="$TIMEOUT" \
    -rss_limit_mb="$RSS_MB" -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" >"$log" 2>&1 || rc=$?
  local execs rate
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log"
    echo "FAILED: $name (exit $rc); input(s) in $artifacts/:"
    ls -1 "$artifacts" | sed 's/^/  /'
    printf '%-14s %8s %12s %8s  %s\n' "$name" "$seconds" "${execs:-?}" "${rate:-?}" \
      "FAILED (log $log)" >>"$summary"
    return 1
  fi
  grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs)' "$log" | tail -n 1 || true
  printf '%-14s %8s %12s %8s  %s\n' "$name" "$seconds" "${execs:-?}" "${rate:-?}" \
    "ok, corpus $(find "$work" -type f | wc -l) inputs" >>"$summary"
}

case "${1:-}" in
  "" | -h | --help)
    usage
    exit 0
    ;;
  list)
    printf '%s\n' "${HARNESSES[@]}"
    exit 0
    ;;
  build)
    build "${HARNESSES[@]}"
    exit 0
    ;;
  all)
    [ $# -eq 2 ] || { echo "usage: scripts/fuzz.sh all SECONDS" >&2; exit 2; }
    names=("${HARNESSES[@]}")
    ;;
  *)
    is_harness "$1" || { echo "scripts/fuzz.sh: unknown harness '$1'" >&2; usage >&2; exit 2; }
    names=("$1")
    ;;
esac
seconds="${2:-300}"
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] ||
  { echo "scripts/fuzz.sh: SECONDS must be a positive number, not '$seconds'" >&2; exit 2; }

build "${names[@]}"
summary="$(mktemp)"
trap 'rm -f "$summary"' EXIT
status=0
jobs="${FUZZ_JOBS:-1}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/fuzz.sh: FUZZ_JOBS must be a positive number, not '$jobs'" >&2; exit 2; }
# Batches of $jobs harnesses; each one's output is held in a file and printed in order when its
# batch is done, so that the lines of two harnesses do not mix.
out_dir="$(mktemp -d)"
trap 'rm -f "$summary"; rm -rf "$out_dir"' EXIT
for ((i = 0; i < ${#names[@]}; i += jobs)); do
  batch=("${names[@]:i:jobs}")
  pids=()
  for n in "${batch[@]}"; do
    run_one "$n" "$seconds" >"$out_dir/$n" 2>&1 &
    pids+=("$!")
  done
  for j in "${!batch[@]}"; do
    wait "${pids[$j]}" || status=1
    cat "$out_dir/${batch[$j]}"
  done
done
echo
printf '%-14s %8s %12s %8s  %s\n' harness seconds executions "exec/s" result
cat "$summary"
exit "$status"
