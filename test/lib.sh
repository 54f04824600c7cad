# Helpers shared by the shell test drivers (test/integration/horarun_test.sh,
# test/remote/remote_test.sh, ...). Most expect $HORARUN. Every horarun run has a deadline; every
# wait polls with a deadline. A driver on test hosts sources it first, then calls begin_work
# (its work directory and the EXIT trap that cleans up) and hosts_up (the hosts); the others
# source it after making and entering their work directory.

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

# ---- network-namespace test hosts (scripts/testhosts.sh) --------------------------------------

# need_netns [WHAT]: exits 77 (skipped) unless this shell may make network namespaces: root, and
# `ip netns add` works (a container may list namespaces but not make them). WHAT says what root
# is needed for (default "network namespaces").
need_netns() {
  [ "$(id -u)" -eq 0 ] || { echo "skip: needs root (${1:-network namespaces})"; exit 77; }
  local probe="hora-probe-$$"
  ip netns add "$probe" 2>/dev/null || { echo "skip: ip netns is unavailable"; exit 77; }
  ip netns del "$probe"
}

# need_sshd: exits 77 (skipped) without the sshd that the test hosts run.
need_sshd() {
  command -v /usr/sbin/sshd >/dev/null || { echo "skip: no sshd"; exit 77; }
}

# begin_work NAME: makes and enters WORK (/tmp/NAME.XXXXXX) and sets the EXIT trap that, even when
# the test fails, kills BACKGROUND (pids a case started), runs cleanup_case if the driver defines
# one, takes down the test hosts that hosts_up brought up, and removes WORK.
begin_work() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX") || { echo "FAIL: mktemp" >&2; exit 1; }
  INDEX="" CONFIG="" STATE="" NET="" SLURMDIR="" HOSTS_SCRIPT="" UP_PID=""
  BACKGROUND=()
  trap end_work EXIT
  cd "$WORK" || exit 1
}

end_work() {
  [ ${#BACKGROUND[@]} -gt 0 ] && kill -KILL "${BACKGROUND[@]}" 2>/dev/null
  declare -F cleanup_case >/dev/null && cleanup_case
  # Ended (by a signal) while hosts_up waited for `up`: let it finish, up to 120 s, to learn the
  # index it took, and take that down.
  if [ -z "$INDEX" ] && [ -n "$UP_PID" ]; then
    local end=$((SECONDS + 120))
    while kill -0 "$UP_PID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
    INDEX=$(sed -n 's/^HORA_TESTHOSTS_INDEX=//p' "$WORK/testhosts.vars" 2>/dev/null)
  fi
  [ -n "$INDEX" ] && "$HOSTS_SCRIPT" down --index "$INDEX" >/dev/null 2>&1
  cd / && rm -rf "$WORK"
}

# hosts_up SCRIPT N [OPTIONS...]: N test hosts h1..hN at a free index, made by SCRIPT
# (scripts/testhosts.sh; scripts/testslurm.sh for a Slurm cluster on them) with OPTIONS (e.g.
# --second-network); the EXIT trap of begin_work takes them down. Sets INDEX, CONFIG (the ssh
# alias file), STATE (the hosts' state directory), NET (their network's first three octets,
# e.g. 198.18.3) and, from testslurm.sh, SLURMDIR and SLURM_CONF.
hosts_up() {
  local script=$1 n=$2 vars
  shift 2
  HOSTS_SCRIPT=$script
  # In the background, so that a signal ends this shell at once and the EXIT trap finds `up`.
  "$script" up --index auto --hosts "$n" "$@" >"$WORK/testhosts.vars" 2>"$WORK/testhosts.log" &
  UP_PID=$!
  wait "$UP_PID" ||
    { cat "$WORK/testhosts.log" >&2; fail "$(basename "$script") up --hosts $n $* failed"; }
  UP_PID=""
  vars=$(cat "$WORK/testhosts.vars")
  eval "$vars"
  INDEX=$HORA_TESTHOSTS_INDEX
  CONFIG=${HORA_TESTHOSTS_SSH_CONFIG:-}
  STATE=${HORA_TESTHOSTS_DIR:-}
  NET=198.18.$INDEX
  SLURMDIR=${HORA_TESTSLURM_DIR:-}
  unset HORA_TESTHOSTS_INDEX HORA_TESTHOSTS_DIR HORA_TESTHOSTS_SSH_CONFIG HORA_TESTSLURM_DIR
}
