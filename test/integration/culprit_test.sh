#!/bin/bash
# The launcher's first promise: when one rank leaves with a non-zero code (or a signal) while its
# peers are in collectives with it, horarun names that rank, not a peer that lost it, and exits
# with its code. `culprit_test.sh LANG MODE CODE NP WHERE`:
#   LANG   cpp (test/integration/exit_culprit.cc) or py (exit_culprit.py, hora.torch)
#   MODE   how the culprit leaves (see the programs' headers: exit, atexit, quick_exit, _exit,
#          return, signal, throw; sys.exit, os._exit, raise, signal)
#   CODE   its exit code (the signal number for `signal`)
#   NP     ranks; the culprit is rank NP-1 when NP is even, rank 0 otherwise
#   WHERE  local (-H localhost:NP) or hosts (two network-namespace test hosts, NP/2 each; exit 77
#          without root or ip netns)
# Environment: HORARUN, EXIT_CULPRIT (the C++ program), EXIT_CULPRIT_PY, PYTHON, PYTHONPATH,
# TESTHOSTS. Each run has a deadline; test hosts are torn down on exit, even on failure.
set -u
LANG_=${1:?usage: culprit_test.sh LANG MODE CODE NP WHERE}
MODE=$2 CODE=$3 NP=$4 WHERE=$5
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/lib.sh
source "$HERE/../lib.sh"
begin_work culprit_test

# Under a sanitizer build (the ThreadSanitizer stage of scripts/test.sh runs this suite), the
# sanitizer's own SIGSEGV handler would end a rank that raises SIGSEGV with its exit code:
# leave the signal to libhora's report and its default action, as crash_report does.
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}handle_segv=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
CULPRIT=$(( NP % 2 == 0 ? NP - 1 : 0 ))
STEP=20
if [ "$LANG_" = cpp ]; then
  PROGRAM=("$EXIT_CULPRIT" "$MODE" "$CODE" "$STEP" "$CULPRIT")
else
  "$PYTHON" -c 'import hora.torch' 2>/dev/null || { echo "skip: hora.torch is not built"; exit 77; }
  PROGRAM=("$PYTHON" "$EXIT_CULPRIT_PY" "$MODE" "$CODE" "$STEP" "$CULPRIT")
fi

HOSTS=(-H "localhost:$NP")
if [ "$WHERE" = hosts ]; then
  need_netns
  hosts_up "$TESTHOSTS" 2
  HOSTS=(--ssh-config "$CONFIG" -H "h1:$((NP / 2)),h2:$((NP / 2))")
fi

run 180 -np "$NP" "${HOSTS[@]}" "${PROGRAM[@]}"
last=$(tail -n 1 err)
if [ "$MODE" = signal ]; then
  want_rc=$((128 + CODE))
  echo "$last" | grep -Eq "^horarun: rank $CULPRIT on [^ ]+ was killed by signal $CODE " ||
    { cat out err; fail "final line names the wrong rank or cause: $last"; }
elif [ "$MODE" = throw ] || [ "$MODE" = raise ]; then
  want_rc=$([ "$MODE" = throw ] && echo 134 || echo 1)
  echo "$last" | grep -Eq "^horarun: rank $CULPRIT on [^ ]+ " ||
    { cat out err; fail "final line names the wrong rank: $last"; }
else
  want_rc=$CODE
  echo "$last" | grep -Eq "^horarun: rank $CULPRIT on [^ ]+ exited with code $CODE$" ||
    { cat out err; fail "final line names the wrong rank or code: $last"; }
fi
[ "$rc" -eq "$want_rc" ] || { cat out err; fail "horarun exited $rc, want $want_rc"; }
# A peer ended by losing the culprit says so in one line, without a native stack dump (that is
# for real faults).
if [ "$MODE" != signal ] && [ "$MODE" != throw ]; then
  grep -v "^\[$CULPRIT\]" err | grep -q "its native stack" &&
    { cat err; fail "a surviving rank printed a crash report's native stack"; }
fi
ok "$LANG_ $MODE $CODE at -np $NP ($WHERE): rank $CULPRIT named, horarun exited $rc"
