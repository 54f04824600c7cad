# Helpers shared by the shell test drivers (test/integration/horarun_test.sh,
# test/remote/remote_test.sh). Source it after making and entering the work directory; it
# expects $HORARUN. Every horarun run has a deadline; every wait polls with a deadline.

# fail MESSAGE: print it with the tails of ./out and ./err, exit 1 (the caller's trap cleans up).
fail() {
  echo "FAIL: $*" >&2
  local f
  for f in out err; do [ -f $f ] && { echo "--- $f" >&2; tail -n 40 $f >&2; }; done
  exit 1
}
ok() { echo "ok: $*"; }

# run SECONDS ARGS...: horarun with a deadline; sets rc; output in ./out and ./err. A horarun
# that had to be killed at the deadline (137 without a rank killed by signal 9) is a hang.
run() {
  local limit=$1; shift
  timeout -s KILL "$limit" "$HORARUN" "$@" >out 2>err
  rc=$?
  [ $rc -eq 137 ] && grep -q . err && ! grep -q "signal 9" err && fail "horarun hung (killed after ${limit}s)"
  return 0
}

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds; 1 when it never did.
wait_for() {
  local limit=$1; shift
  local end=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -ge $end ] && return 1
    sleep 0.05
  done
}

# gone PID: the process has exited (for `wait_for SECONDS gone PID`).
gone() { ! kill -0 "$1" 2>/dev/null; }

# check_collectives NP: the last run of collectives_check at -np NP passed on every rank.
check_collectives() {
  local np=$1 n
  [ $rc -eq 0 ] || fail "collectives_check at -np $np exited $rc"
  n=$(grep -cE "^\[[0-9]+\]<stdout>:collectives_check rank [0-9]+ of $np: [0-9]+ checks, 0 failures$" out)
  [ "$n" -eq "$np" ] || fail "expected $np clean summaries, got $n"
}

# The Debian interpreter for Horovod tests: the python3 first on PATH may be a pyenv shim
# without torch.
PYTHON=/usr/bin/python3

# unpack_horovod: unpacks $HOROVOD_ARCHIVE (Horovod 0.28.1 for Debian's PyTorch) into
# $WORK/hvd and exports PYTHONPATH to it; exits 77 (skipped) without the archive or PyTorch.
unpack_horovod() {
  [ -r "${HOROVOD_ARCHIVE:-}" ] || { echo "skip: no Horovod archive at '${HOROVOD_ARCHIVE:-}'"; exit 77; }
  "$PYTHON" -c 'import torch' 2>/dev/null || { echo "skip: $PYTHON has no torch (python3-torch)"; exit 77; }
  mkdir -p "$WORK/hvd" && tar -xJf "$HOROVOD_ARCHIVE" -C "$WORK/hvd" || fail "cannot unpack $HOROVOD_ARCHIVE"
  export PYTHONPATH="$WORK/hvd/site"
}
