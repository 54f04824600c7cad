#!/bin/bash
# Gloo's sync pairs for small allreduces (HORA_GLOO_SYNC, runtime/gloo/sync_policy.h) in real
# jobs: `gloo_sync_test.sh CASE [ARGS]`. Every job runs with HORA_SHM=0, so the ranks of this
# host talk over loopback TCP as ranks on different hosts would.
# Environment: HORARUN (the launcher), SYNC_PROBE (sync_probe).
# Every horarun run has a deadline (`timeout`).
set -u
WORK=$(mktemp -d /tmp/gloo_sync_test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# fail, ok, run
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# The debug line build_mesh() logs: how many bytes go to the sync pairs, and why.
sync_line() { grep -m1 "allreduces of up to" err; }

case_results() {
  # Every rank checks every element, for sizes on both sides of the threshold, blocking and
  # through the async engine. Odd -np folds ranks before the recursive doubling. HORA_GLOO_SYNC=0
  # (the async pairs alone, which collectives_np* cover too) only at -np 2, to save CI time.
  local np=$1 mode modes="1 busy"
  [ "$np" -eq 2 ] && modes="1 busy 0"
  for mode in $modes; do
    run 240 -np "$np" -H "localhost:$np" -x HORA_SHM=0 -x HORA_GLOO_SYNC=$mode \
      --log-level debug "$SYNC_PROBE" check
    [ $rc -eq 0 ] || fail "HORA_GLOO_SYNC=$mode -np $np exited $rc: $(grep MISMATCH err | head -3)"
    [ "$(grep -cE "<stdout>:sync_probe rank [0-9]+ of $np: [0-9]+ checks, 0 failures$" out)" -eq "$np" ] ||
      fail "HORA_GLOO_SYNC=$mode -np $np: expected $np clean summaries"
    if [ $mode = 0 ]; then
      sync_line | grep -q "up to 0 bytes" || fail "HORA_GLOO_SYNC=0 still made sync pairs: $(sync_line)"
    else
      sync_line | grep -q "up to 65536 bytes" || fail "HORA_GLOO_SYNC=$mode made no sync pairs: $(sync_line)"
    fi
  done
  ok "allreduces of 4 B .. 160 KB right on every rank at -np $np, HORA_GLOO_SYNC in: $modes"
}

case_peer_dies() {
  # Rank 1 is SIGKILLed while the others are in a 64-byte allreduce on the sync pairs: each of
  # them fails (no hang: the job's deadline is far below HORA_TIMEOUT_SECONDS x 5), and rank 0,
  # which reads from rank 1 first, names it.
  local mode
  for mode in 1 busy; do
    run 90 -np 3 -H localhost:3 -x HORA_SHM=0 -x HORA_GLOO_SYNC=$mode "$SYNC_PROBE" kill
    [ $rc -eq 137 ] || fail "HORA_GLOO_SYNC=$mode: rc=$rc, want 137 (rank 1's SIGKILL)"
    grep -q "^horarun: rank 1 on localhost was killed by signal 9 (SIGKILL)$" err ||
      fail "HORA_GLOO_SYNC=$mode: no final message naming rank 1"
    grep -E "^\[0\]<stderr>:rank 0 failed as expected: .*sync Gloo pairs.*peer rank 1 \(localhost, " err >/dev/null ||
      fail "HORA_GLOO_SYNC=$mode: rank 0's error does not name rank 1 on the sync pairs"
  done
  ok "a peer killed during a sync allreduce is named by the rank that reads from it"
}

have_pidfiles() { [ "$(ls "$1"/*.pid 2>/dev/null | wc -l)" -eq "$2" ]; }

# Linux state of process PID's main thread ('S': sleeping, e.g. in recv(2)).
state_of() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1; }
sleeping() { [ "$(state_of "$1")" = S ]; }

case_abort() {
  # -np 4 with HORA_TIMEOUT_SECONDS 300: ranks 2 and 3 sleep outside any collective, rank 0
  # waits in a sync read for rank 2 (with sleeping reads: until its main thread sleeps), then
  # rank 3 is killed. The launcher aborts the job; only that abort can end rank 0's read, which
  # must report it (AbortedError) well within the job's 90 s deadline, not hang or time out.
  local mode job
  for mode in 1 busy; do
    rm -rf pids && mkdir pids
    timeout -s KILL 90 "$HORARUN" -np 4 -H localhost:4 -x HORA_SHM=0 -x HORA_GLOO_SYNC=$mode \
      --gloo-timeout-seconds 300 "$SYNC_PROBE" abort "$WORK/pids" >out 2>err &
    job=$!
    wait_for 60 have_pidfiles pids 4 || fail "HORA_GLOO_SYNC=$mode: the ranks did not start"
    wait_for 30 grep -q "rank 0 entering" out || fail "HORA_GLOO_SYNC=$mode: rank 0 not in its allreduce"
    if [ $mode = 1 ]; then
      wait_for 30 sleeping "$(cat pids/0.pid)" || fail "rank 0 never slept in its allreduce"
    fi
    kill -KILL "$(cat pids/3.pid)"
    wait "$job"
    rc=$?
    [ $rc -eq 137 ] || fail "HORA_GLOO_SYNC=$mode: rc=$rc, want 137 (rank 3's SIGKILL)"
    grep -E "^\[0\]<stderr>:rank 0 failed as expected: .*sync Gloo pairs.*job aborted by launcher: rank 3 on localhost was killed" err >/dev/null ||
      fail "HORA_GLOO_SYNC=$mode: rank 0 did not report the abort"
    grep -qE "^\[1\]<stderr>:rank 1 failed as expected" err || fail "HORA_GLOO_SYNC=$mode: rank 1 did not fail"
  done
  ok "the launcher's abort ends an allreduce blocked in a sync read"
}

case_mismatch() {
  # Rank 1 alone sets another threshold: init() fails on every rank with a MismatchError that
  # names the variables, instead of allreduces that disagree about their pairs.
  run 90 -np 2 -H localhost:2 -x HORA_SHM=0 sh -c \
    'if [ "$HORA_RANK" = 1 ]; then export HORA_GLOO_SYNC_BYTES=16; fi; exec "$0" check' "$SYNC_PROBE"
  [ $rc -ne 0 ] || fail "the job passed with different HORA_GLOO_SYNC_BYTES"
  grep -q "rank 1 (localhost) runs allreduces of up to 16 bytes on sync Gloo pairs, this rank up to 65536" err ||
    fail "rank 0 does not name rank 1's threshold"
  grep -q "HORA_GLOO_SYNC_BYTES" err || fail "the error does not name HORA_GLOO_SYNC_BYTES"
  run 30 -np 2 -H localhost:2 -x HORA_SHM=0 -x HORA_GLOO_SYNC=sometimes "$SYNC_PROBE" check
  [ $rc -ne 0 ] && grep -q "HORA_GLOO_SYNC=sometimes is not auto, 0 (off), 1 (on) or busy" err ||
    fail "a bad HORA_GLOO_SYNC was not refused by name (rc=$rc)"
  ok "ranks that disagree about the sync threshold, or a bad value, fail init() by name"
}

"case_${1//-/_}" "${@:2}"
