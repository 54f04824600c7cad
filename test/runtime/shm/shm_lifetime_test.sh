#!/usr/bin/env bash
# Shared-memory segments never outlive their job (docs/shm.md, "Lifetime").
# One case per run: shm_lifetime_test.sh CASE. Local rank 1's first shm_open is held back by the
# LD_PRELOAD shim ($SHIM, test/runtime/shm/shm_open_shim.cc), so local rank 0's segment still has its
# name in /dev/shm when the job is ended:
#   delayed_open    rank 1 joins after the start timeout: the job fails, nothing is left
#   sigint_horarun  SIGINT to horarun (local rank 0 also ends its wait on the abort itself)
#   sigkill_horarun SIGKILL to horarun (the guards must clean up)
#   sigkill_rank0   SIGKILL to local rank 0, the segment's creator
# The shim logs the names this job's ranks create, so the check sees this job's segments only.
# Needs HORARUN, CHILD (shm_lifetime_child) and SHIM from the environment (test/runtime/shm/meson.build).
set -u
CASE=${1:?usage: shm_lifetime_test.sh CASE}
LIB=$(cd "$(dirname "$0")/../.." && pwd)/lib.sh
WORK=$(mktemp -d /tmp/hora-shm-lifetime.XXXXXX)
HPID=
cleanup() {
  [ -n "$HPID" ] && kill -KILL "$HPID" 2>/dev/null
  # Names this job created and the test could not see removed (a failed run): do not leak them.
  [ -f "$WORK/shm.log" ] && awk '{print $2}' "$WORK/shm.log" | while read -r n; do rm -f "/dev/shm/${n#/}"; done
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK" || exit 1
. "$LIB"

LOG=$WORK/shm.log
# In the ASan build the sanitizer's runtime must come first among the preloaded libraries.
PRELOAD=$SHIM
ASAN_RUNTIME=$(ldd "$CHILD" | awk '/libasan/ {print $3; exit}')
[ -z "$ASAN_RUNTIME" ] || PRELOAD=$ASAN_RUNTIME:$SHIM
# start DELAY START_TIMEOUT: the job in the background, HPID its horarun.
start() {
  "$HORARUN" -np 2 -H localhost:2 --start-timeout "$2" -x HORA_SHM=1 -x LD_PRELOAD="$PRELOAD" \
    -x HORA_TEST_SHM_LOG="$LOG" -x HORA_TEST_SHM_DELAY="$1" "$CHILD" 3 >out 2>err &
  HPID=$!
}
# The job's segment, created and still named in /dev/shm.
created() {
  local n
  n=$(awk '$1 == "create" {print $2; exit}' "$LOG" 2>/dev/null)
  [ -n "$n" ] && [ -e "/dev/shm/${n#/}" ]
}
# No name this job created is left in /dev/shm.
none_left() {
  local n
  for n in $(awk '{print $2}' "$LOG"); do [ -e "/dev/shm/${n#/}" ] && return 1; done
  return 0
}
# No process of this job is left (its rank program runs nowhere else).
no_ranks() { ! pgrep -f "^$CHILD " >/dev/null; }

finish() {
  wait_for 60 gone "$HPID" || fail "horarun still runs 60 s after $1"
  wait "$HPID" 2>/dev/null
  rc=$?
  HPID=
  # The guards end their ranks and clean up after horarun (SIGKILL) or with it.
  wait_for 30 no_ranks || fail "ranks still run 30 s after $1: $(pgrep -af "^$CHILD ")"
  wait_for 10 none_left || fail "after $1, left in /dev/shm: $(for n in $(awk '{print $2}' "$LOG"); do [ -e "/dev/shm/${n#/}" ] && echo "$n"; done)"
  ok "$CASE: horarun exited $rc, no rank and no segment of the job left ($(grep -c create "$LOG") created)"
}

case $CASE in
  delayed_open)
    start 30 3
    wait_for 60 gone "$HPID" || fail "horarun still runs 60 s after the start timeout of 3 s"
    grep -q "create " "$LOG" || fail "local rank 0 created no segment"
    finish "the start timeout"
    [ "$rc" -ne 0 ] || fail "the job succeeded although rank 1 joined after the start timeout"
    ;;
  sigint_horarun | sigkill_horarun | sigkill_rank0)
    start 60 50
    wait_for 30 created || fail "local rank 0 did not create its segment within 30 s"
    case $CASE in
      sigint_horarun) kill -INT "$HPID" ;;
      sigkill_horarun) kill -KILL "$HPID" ;;
      sigkill_rank0)
        name=$(awk '$1 == "create" {print $2; exit}' "$LOG")
        pid=$(echo "$name" | awk -F- '{print $(NF-1)}')
        kill -KILL "$pid" || fail "cannot kill local rank 0 (pid $pid from $name)"
        ;;
    esac
    finish "$CASE"
    # Local rank 0 itself saw the launcher's abort while waiting for rank 1 to map the segment,
    # and so unlinked it before its guard had to (runtime/shm/shm_group.h, ShmOptions::aborted).
    if [ "$CASE" = sigint_horarun ]; then
      grep -q "^\[0\]<stderr>:.*forming the shared-memory group of this host failed: job aborted by launcher" err ||
        fail "local rank 0 did not end its shared-memory wait on the launcher's abort"
    fi
    ;;
  *) echo "unknown case $CASE" >&2; exit 2 ;;
esac
