#!/usr/bin/env bash
# Soak: many short jobs ended in mixed ways, checking that each leaves nothing behind
# (docs/shm.md, "Lifetime"). Not part of the default test suite (it takes minutes);
# test/runtime/shm/meson.build runs a 10-job version as `shm_soak_short`.
#
#   scripts/soak.sh [--local N] [--remote N] [--build DIR] [--seed S]
#
# Each job is `horarun -np 4` of test/runtime/shm/shm_lifetime_child (N allreduces of 1 MiB over shared
# memory), on this host (--local, default 100) or on two namespace test hosts of
# scripts/testhosts.sh (--remote, default 20; needs root, else skipped), ended by one of:
#   clean        runs to its end
#   rank_kill    SIGKILL to a random rank after a random 0.1-1.5 s
#   horarun_kill SIGKILL to horarun after a random 0.1-1.5 s
#   sigint       SIGINT to horarun after a random 0.1-1.5 s
# Half the jobs hold a local rank's first shm_open back by 2 s (test/runtime/shm/shm_open_shim.cc), so
# the kill often lands while a segment still has its name. After each job (deadlines: horarun
# 60 s, its processes 30 s after it) it checks: no process of the job is left (horarun's
# descendants at the kill, and every process started with the job's environment), none of the
# job's segments is left in /dev/shm, and no process holds a descriptor or mapping of one.
# "formed": jobs whose local rank 0 created its segment (the others ended before); a "clean" job
# that did not finish counts as a failure. It also records horarun's open descriptors at the kill (min-max: the same at every kill, no
# leak) and counts the jobs that had a segment still named in /dev/shm at the kill ("named at
# kill": the jobs where the cleanup mattered). Prints one table row per way of
# ending, and exits 1 if anything was left.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
LOCAL_JOBS=100
REMOTE_JOBS=20
SEED=$$
while [ $# -gt 0 ]; do
  case $1 in
    --local) LOCAL_JOBS=$2; shift 2 ;;
    --remote) REMOTE_JOBS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    *) echo "usage: scripts/soak.sh [--local N] [--remote N] [--build DIR] [--seed S]" >&2; exit 2 ;;
  esac
done
RANDOM=$SEED
HORARUN=$BUILD/cli/horarun
CHILD=$BUILD/test/runtime/shm/shm_lifetime_child
SHIM=$BUILD/test/runtime/shm/libshm_open_shim.so
TESTHOSTS=$ROOT/scripts/testhosts.sh
for f in "$HORARUN" "$CHILD" "$SHIM"; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "soak: $f is missing: build first (ninja -C $BUILD)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/hora-soak.XXXXXX)
INDEX=
HPID=
cleanup() {
  [ -n "$HPID" ] && kill -KILL "$HPID" 2>/dev/null
  [ -n "$INDEX" ] && "$TESTHOSTS" down --index "$INDEX" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds; 1 when it never did.
wait_for() {
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.05; done
}
gone() { ! kill -0 "$1" 2>/dev/null; }
# descendants PID: every process below PID.
descendants() {
  local p
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$p"; descendants "$p"; done
}
# job_pids LOG: processes started with this job's environment (its ranks, anywhere).
job_pids() { grep -lsa "HORA_TEST_SHM_LOG=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
alive_of() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && echo "$p"; done; }
segments_left() { local n; for n in $(awk '{print $2}' "$1" 2>/dev/null | sort -u); do [ -e "/dev/shm/${n#/}" ] && echo "$n"; done; }
# Descriptors or mappings of the job's segments in any process.
segment_holders() {
  local n
  for n in $(awk '$1 == "create" {print $2}' "$1" 2>/dev/null); do
    grep -ls "${n#/}" /proc/[0-9]*/maps 2>/dev/null
    find /proc/[0-9]*/fd -lname "*${n#/}*" 2>/dev/null
  done
}

declare -A JOBS PROCS SEGS HOLDERS FDMIN FDMAX SECS NAMED RAN
FAILED=0
record() {  # KEY procs segs holders fds seconds named-at-kill
  local k=$1
  JOBS[$k]=$((${JOBS[$k]:-0} + 1))
  PROCS[$k]=$((${PROCS[$k]:-0} + $2))
  SEGS[$k]=$((${SEGS[$k]:-0} + $3))
  HOLDERS[$k]=$((${HOLDERS[$k]:-0} + $4))
  if [ "$5" -ge 0 ]; then
    [ -z "${FDMIN[$k]:-}" ] || [ "$5" -lt "${FDMIN[$k]}" ] && FDMIN[$k]=$5
    [ -z "${FDMAX[$k]:-}" ] || [ "$5" -gt "${FDMAX[$k]}" ] && FDMAX[$k]=$5
  fi
  SECS[$k]=$((${SECS[$k]:-0} + $6))
  NAMED[$k]=$((${NAMED[$k]:-0} + ($7 > 0 ? 1 : 0)))
  RAN[$k]=$((${RAN[$k]:-0} + $8))
}

MODES=(clean rank_kill horarun_kill sigint)
# one_job WHERE N: one job; WHERE is "local" or "remote".
one_job() {
  local where=$1 n=$2 mode=${MODES[$((RANDOM % 4))]} dir=$WORK/job$2-$1
  mkdir -p "$dir"
  local log=$dir/shm.log delay=$((2 * (RANDOM % 2))) iters=$((200 + RANDOM % 2000)) start=$SECONDS
  local hosts=(-H localhost:4)
  [ "$where" = remote ] && hosts=(--ssh-config "$CONFIG" -H h1:2,h2:2)
  "$HORARUN" -np 4 "${hosts[@]}" --start-timeout 20 -x HORA_SHM=1 -x LD_PRELOAD="$SHIM" \
    -x HORA_TEST_SHM_LOG="$log" -x HORA_TEST_SHM_DELAY="$delay" "$CHILD" "$iters" \
    >"$dir/out" 2>"$dir/err" &
  HPID=$!
  disown "$HPID"  # no "Killed" line from bash; its exit code is not needed
  local tree=() fds=-1 named=0
  if [ "$mode" != clean ]; then
    sleep "0.$((1 + RANDOM % 9))$((RANDOM % 10))"
    [ $((RANDOM % 3)) -eq 0 ] && sleep 0.5
    tree=($(descendants "$HPID"))
    fds=$(ls "/proc/$HPID/fd" 2>/dev/null | wc -l)
    [ "$fds" -eq 0 ] && fds=-1  # it had ended already
    named=$(segments_left "$log" | wc -l)
    case $mode in
      rank_kill)
        local ranks=($(job_pids "$log"))
        [ ${#ranks[@]} -gt 0 ] && kill -KILL "${ranks[$((RANDOM % ${#ranks[@]}))]}" 2>/dev/null ;;
      horarun_kill) kill -KILL "$HPID" 2>/dev/null ;;
      sigint) kill -INT "$HPID" 2>/dev/null ;;
    esac
  fi
  local procs=0 segs holders ran=0
  if ! wait_for 60 gone "$HPID"; then
    echo "soak: job $n ($where, $mode): horarun still runs after 60 s" >&2
    kill -KILL "$HPID" 2>/dev/null; procs=$((procs + 1))
  fi
  HPID=
  job_left() { [ -z "$(alive_of "${tree[@]}")$(job_pids "$log")" ]; }
  if ! wait_for 30 job_left; then
    local left=$(alive_of "${tree[@]}") ranks_left=$(job_pids "$log")
    echo "soak: job $n ($where, $mode): processes left 30 s after horarun: $left $ranks_left" >&2
    procs=$((procs + $(echo $left $ranks_left | wc -w)))
  fi
  grep -q "^create " "$log" 2>/dev/null && ran=1
  if [ "$mode" = clean ] && ! grep -q "allreduces ok" "$dir/out"; then
    echo "soak: job $n ($where, clean) did not finish: $(tail -n 3 "$dir/err")" >&2
    FAILED=$((FAILED + 1))
  fi
  segs=$(segments_left "$log" | wc -l)
  holders=$(segment_holders "$log" | wc -l)
  [ "$segs" -gt 0 ] && echo "soak: job $n ($where, $mode): left in /dev/shm: $(segments_left "$log" | tr '\n' ' ')" >&2
  [ "$holders" -gt 0 ] && echo "soak: job $n ($where, $mode): segment still held: $(segment_holders "$log" | tr '\n' ' ')" >&2
  # Leave nothing behind even when the check failed.
  for s in $(segments_left "$log"); do rm -f "/dev/shm/${s#/}"; done
  record "$where $mode" "$procs" "$segs" "$holders" "$fds" $((SECONDS - start)) "$named" "$ran"
  rm -rf "$dir"
}

if [ "$REMOTE_JOBS" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "soak: not root (network namespaces): skipping the $REMOTE_JOBS remote jobs" >&2
    REMOTE_JOBS=0
  else
    vars=$("$TESTHOSTS" up --index auto --hosts 2 2>"$WORK/testhosts.log") ||
      { cat "$WORK/testhosts.log" >&2; echo "soak: testhosts.sh up failed" >&2; exit 1; }
    eval "$vars"
    INDEX=$HORA_TESTHOSTS_INDEX
    CONFIG=$HORA_TESTHOSTS_SSH_CONFIG
  fi
fi

for ((i = 1; i <= LOCAL_JOBS; i++)); do one_job local "$i"; done
for ((i = 1; i <= REMOTE_JOBS; i++)); do one_job remote "$i"; done

bad=0
printf '%-20s %5s %6s %14s %15s %14s %14s %12s %6s\n' "where, ending" jobs formed "named at kill" "processes left" "segments left" "segments held" "horarun fds" "s/job"
for k in "local clean" "local rank_kill" "local horarun_kill" "local sigint" \
         "remote clean" "remote rank_kill" "remote horarun_kill" "remote sigint"; do
  [ -n "${JOBS[$k]:-}" ] || continue
  fd="-"
  [ -n "${FDMIN[$k]:-}" ] && fd="${FDMIN[$k]}-${FDMAX[$k]}"
  printf '%-20s %5d %6d %14d %15d %14d %14d %12s %6.1f\n' "$k" "${JOBS[$k]}" "${RAN[$k]}" "${NAMED[$k]}" "${PROCS[$k]}" "${SEGS[$k]}" \
    "${HOLDERS[$k]}" "$fd" "$(echo "${SECS[$k]} / ${JOBS[$k]}" | bc -l)"
  bad=$((bad + PROCS[$k] + SEGS[$k] + HOLDERS[$k]))
done
echo "seed $SEED: $((LOCAL_JOBS + REMOTE_JOBS)) jobs, $bad things left behind, $FAILED clean jobs failed"
[ "$bad" -eq 0 ] && [ "$FAILED" -eq 0 ]
