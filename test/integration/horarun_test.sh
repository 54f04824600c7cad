#!/bin/bash
# Integration tests of horarun with real ranks: `horarun_test.sh CASE [ARGS]`.
# Environment: HORARUN (the launcher), PROBE (rank_probe), COLLECTIVES (collectives_check),
# DROPPER (connection_dropper), ALLREDUCE_ONCE (allreduce_once), FASHION_MNIST (the example).
# Every horarun run has a deadline (`timeout`); waits poll a condition with a deadline.
set -u
WORK=$(mktemp -d /tmp/horarun_test.XXXXXX)
BACKGROUND=()  # horarun processes started in the background; killed on exit if still there
trap '[ ${#BACKGROUND[@]} -gt 0 ] && kill -KILL "${BACKGROUND[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
cd "$WORK"

# fail, ok, run, wait_for, gone, check_collectives
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# cpu_list.py, imported by the placement checks' Python.
INTEGRATION_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

pids_gone() {
  local f
  for f in "$1"/*.pid; do
    [ -e "$f" ] || continue
    gone "$(cat "$f")" || return 1
  done
  return 0
}

have_pidfiles() { [ "$(ls "$1"/*.pid 2>/dev/null | wc -l)" -eq "$2" ]; }

case_collectives() {
  local np=$1
  run 240 -np "$np" -H "localhost:$np" "$COLLECTIVES"
  check_collectives "$np"
  ok "every collective x dtype x op at -np $np"
}

# The main job (scripts/demo.sh) for one epoch, twice: every rank ends with the same weights,
# and so does the second run. The shared-memory allreduce sums every element in rank order
# whichever rank reduces it, so the engine's fusion (which varies with timing) cannot change a
# bit of the result.
case_fashion_mnist() {
  local sums=() n
  for n in 1 2; do
    run 300 -np 4 -H localhost:4 "$FASHION_MNIST" --epochs 1
    [ $rc -eq 0 ] || fail "run $n: rc=$rc"
    local acc
    acc=$(sed -n 's/.*final test accuracy \([0-9.]*\)%.*/\1/p' out)
    [ -n "$acc" ] || fail "run $n: no final test accuracy"
    awk -v a="$acc" 'BEGIN { exit !(a >= 80) }' || fail "run $n: test accuracy $acc% after 1 epoch (< 80%)"
    local ranks
    ranks=$(grep -c 'rank [0-3]: final weights fnv1a64' out)
    [ "$ranks" -eq 4 ] || fail "run $n: $ranks of 4 ranks printed their weights' checksum"
    local distinct
    distinct=$(sed -n 's/.*final weights fnv1a64 //p' out | sort -u)
    [ "$(echo "$distinct" | wc -l)" -eq 1 ] || fail "run $n: ranks ended with different weights: $distinct"
    sums+=("$distinct")
  done
  [ "${sums[0]}" = "${sums[1]}" ] || fail "two runs of the same job ended with different weights: ${sums[*]}"
  ok "fashion_mnist -np 4: $acc% after 1 epoch, weights ${sums[0]} on every rank, in both runs"
}

case_plain() {
  run 30 -np 4 -H localhost:4 sh -c 'echo $HORA_RANK/$HORA_SIZE'
  [ $rc -eq 0 ] || fail "rc=$rc"
  [ "$(sort out)" = "$(printf '[0]<stdout>:0/4\n[1]<stdout>:1/4\n[2]<stdout>:2/4\n[3]<stdout>:3/4')" ] ||
    fail "unexpected output"
  run 30 -np 2 sh -c 'exit 5'
  [ $rc -eq 5 ] || fail "exit 5 gave rc=$rc"
  run 30 -np 2 no-such-command-xyz
  [ $rc -eq 127 ] || fail "missing command gave rc=$rc"
  grep -q "cannot run 'no-such-command-xyz'" err || fail "no message for a missing command"
  ok "plain commands, exit codes"
}

case_usage() {
  run 10 -np 5 -H localhost:2 true
  [ $rc -eq 2 ] || fail "np > slots gave rc=$rc"
  grep -q -- "-np 5" err && grep -q "2 on 1 host" err || fail "message must name both numbers"
  run 10 -np 2 -H 'bad host:2' true
  [ $rc -eq 2 ] || fail "bad -H gave rc=$rc"
  # An empty host list (think -H "$HOSTS" with HOSTS unset) is not localhost.
  run 10 -np 2 -H "" touch "$WORK/launched"
  [ $rc -eq 2 ] && grep -q -- "--hosts: the value is empty" err || fail "-H '' gave rc=$rc"
  run 10 --hostfile "" touch "$WORK/launched"
  [ $rc -eq 2 ] && grep -q -- "--hostfile: the value is empty" err || fail "--hostfile '' gave rc=$rc"
  run 10 -np "" true
  [ $rc -eq 2 ] && grep -q "the value is empty" err || fail "-np '' gave rc=$rc"
  run 10 -np 2 --fusion-threshold-mb 1e300 true
  [ $rc -eq 2 ] && grep -q -- "--fusion-threshold-mb" err || fail "--fusion-threshold-mb 1e300 gave rc=$rc"
  # The same machine under two names would give two ranks local_rank 0 on it.
  run 10 -H localhost:2,127.0.0.1:2 touch "$WORK/launched"
  [ $rc -eq 2 ] && grep -q "hosts localhost and 127.0.0.1 are both this machine" err ||
    fail "localhost:2,127.0.0.1:2 gave rc=$rc"
  # A remote host would be preflighted: test/remote covers that.
  run 10 --dry-run -np 2 -H 127.0.0.1:2 touch "$WORK/launched"
  [ $rc -eq 0 ] && grep -q "^host 127.0.0.1: 2 ranks, local$" out || fail "--dry-run: no host line"
  grep -q "^network: every host is this machine: loopback$" out && grep -q "^  127.0.0.1: lo 127.0.0.1$" out ||
    fail "--dry-run did not print the network choice"
  [ ! -e "$WORK/launched" ] || fail "--dry-run started a rank"
  # A FIFO with no writer as --hostfile is refused at once (it used to block forever).
  mkfifo "$WORK/hosts.fifo"
  run 10 --hostfile "$WORK/hosts.fifo" true
  [ $rc -eq 2 ] && grep -q "is not a regular file (a FIFO)" err || fail "--hostfile FIFO gave rc=$rc"
  # Commands that cannot run say why.
  printf '#!/nonexistent/python9\n' >"$WORK/train.sh" && chmod +x "$WORK/train.sh"
  run 10 -np 1 "$WORK/train.sh"
  [ $rc -eq 126 ] && grep -q "#! interpreter '/nonexistent/python9' does not exist" err ||
    fail "missing #! interpreter gave rc=$rc"
  run 10 -np 1 "$WORK"
  [ $rc -eq 126 ] && grep -q "$WORK is a directory" err || fail "a directory as the command gave rc=$rc"
  run 10 -cb
  [ $rc -eq 0 ] && grep -q "Gloo" out || fail "-cb"
  ok "usage errors exit 2; --dry-run and -cb exit 0"
}

case_env() {
  # One host (this machine cannot be two hosts of a job); ranks whose local and cross ranks
  # differ from the global ones are test/remote's (two_hosts, three_hosts).
  run 120 -np 3 -H localhost:3 "$PROBE" env
  [ $rc -eq 0 ] || fail "rc=$rc"
  [ "$(grep -c 'env ok=1' out)" -eq 3 ] || fail "not every rank agreed with its environment"
  grep -q '^\[2\]<stdout>:env ok=1 rank=2 size=3 local_rank=2 cross_rank=0$' out ||
    fail "rank 2 should be local_rank 2, cross_rank 0"
  # The contract as a plain rank sees it.
  run 30 -np 2 -H localhost:2 -x HORA_TEST_FWD=yes --log-level debug --tcp sh -c 'env | sort'
  [ $rc -eq 0 ] || fail "env run rc=$rc"
  for kv in HORA_RANK=1 HORA_SIZE=2 HORA_LOCAL_RANK=1 HORA_LOCAL_SIZE=2 HORA_CROSS_RANK=0 \
            HORA_CROSS_SIZE=1 HORA_HOSTNAME=localhost HORA_HOST_INDEX=0 HORA_IFACE=lo \
            HORA_START_TIMEOUT=30 HORA_LOG_LEVEL=debug HOROVOD_RANK=1 HOROVOD_CONTROLLER=gloo \
            RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 \
            GLOO_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1 NCCL_IB_DISABLE=1 \
            HORA_TEST_FWD=yes; do
    grep -qx "\[1\]<stdout>:$kv" out || fail "rank 1 lacks $kv"
  done
  grep -qE '^\[1\]<stdout>:HORA_RENDEZVOUS=127\.0\.0\.1:[0-9]+$' out || fail "HORA_RENDEZVOUS"
  grep -qE '^\[1\]<stdout>:HORA_SECRET=[0-9a-f]{64}$' out || fail "HORA_SECRET"
  grep -qE '^\[1\]<stdout>:MASTER_PORT=[0-9]+$' out || fail "MASTER_PORT"
  ok "environment contract seen by real ranks"
}

# whole_lines RANK STREAM KIND: counts lines `[RANK]<STREAM>:rank=RANK KIND=i <3000 x c> end`
# where c is the rank's letter (rank_probe's `output` mode), i.e. lines that arrived whole.
whole_lines() {
  awk -v rank="$1" -v stream="$2" -v kind="$3" '
    BEGIN { c = sprintf("%c", 97 + rank); body = ""; for (i = 0; i < 3000; i++) body = body c
            prefix = "[" rank "]<" stream ">:"; good = 0 }
    index($0, prefix) == 1 {
      n = split(substr($0, length(prefix) + 1), f, " ")
      if (n == 4 && f[1] == "rank=" rank && f[2] ~ ("^" kind "=[0-9]+$") && f[3] == body &&
          f[4] == "end") good++
    }
    END { print good }'
}

case_output() {
  run 60 -np 3 --output-filename logs "$PROBE" output 200
  [ $rc -eq 0 ] || fail "rc=$rc"
  local r
  for r in 0 1 2; do
    [ "$(whole_lines "$r" stdout line < out)" -eq 200 ] || fail "rank $r: stdout lines missing or mixed"
    [ "$(whole_lines "$r" stderr err < err)" -eq 200 ] || fail "rank $r: stderr lines missing or mixed"
    grep -qx "\[$r\]<stdout>:rank=$r last line without newline" out || fail "rank $r: partial last line lost"
    # The files are horovodrun's: 200 prefixed lines, then the last one without its newline.
    [ "$(whole_lines "$r" stdout line < logs/rank.$r/stdout)" -eq 200 ] || fail "logs/rank.$r/stdout"
    [ "$(wc -l < logs/rank.$r/stdout)" -eq 200 ] || fail "logs/rank.$r/stdout: line count"
    [ "$(tail -n 1 logs/rank.$r/stdout)" = "[$r]<stdout>:rank=$r last line without newline" ] || fail "logs/rank.$r/stdout: last line"
    [ "$(whole_lines "$r" stderr err < logs/rank.$r/stderr)" -eq 200 ] || fail "logs/rank.$r/stderr"
  done
  # Every line of horarun's stdout is a rank's whole line.
  [ "$(grep -cvE '^\[[0-2]\]<stdout>:rank=' out)" -eq 0 ] || fail "stray stdout lines"
  run 30 -np 1 -prefix-timestamp echo hi
  grep -qE '^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} [0-9]{4}\[0\]<stdout>:hi$' out ||
    fail "timestamp prefix"
  ok "prefixed whole lines, nothing lost, --output-filename, timestamps"
}

case_exit3() {
  local tag="tag-$$-$RANDOM"
  run 60 -np 3 "$PROBE" exit 3 1 "$tag"
  [ $rc -eq 3 ] || fail "rc=$rc, want 3"
  grep -q "^horarun: rank 1 on localhost exited with code 3$" err || fail "final message"
  pgrep -f "$tag" >/dev/null && fail "ranks still running after horarun exited"
  ok "rank exiting 3: horarun exits 3, the others are gone"
}

case_exit3_slow_to_exit() {
  # Rank 1 dies (its connections drop at once) but its process ends a second later, so the
  # peers it takes down (exit 1) reach horarun first; the verdict still names rank 1, which
  # lost its rendezvous connection first (seen as a flake of exit3 under load).
  local tag="tag-$$-$RANDOM"
  run 60 -np 3 sh -c '"$0" exit 3 1 "$1"; rc=$?; [ "$HORA_RANK" = 1 ] && sleep 1; exit $rc' \
    "$PROBE" "$tag"
  [ $rc -eq 3 ] || fail "rc=$rc, want 3"
  grep -q "^horarun: rank 1 on localhost exited with code 3$" err || fail "final message"
  ok "the rank that dropped first is named, though a peer's failure reached horarun first"
}

case_kill_in_allreduce() {
  local start=$SECONDS
  run 90 -np 3 "$PROBE" kill-in-allreduce
  [ $rc -eq 137 ] || fail "rc=$rc, want 137"
  grep -q "^horarun: rank 1 on localhost was killed by signal 9 (SIGKILL)$" err || fail "final message"
  for r in 0 2; do
    grep -E "^\[$r\]<stderr>:rank $r failed as expected: .*rank 1" err >/dev/null ||
      fail "rank $r's error does not name rank 1"
  done
  ok "rank SIGKILLed in an allreduce: the others fail naming rank 1, exit 137 in $((SECONDS - start)) s"
}

case_crash_report() {
  # Under a sanitizer build (ThreadSanitizer's stage of scripts/test.sh), the sanitizer's own
  # SIGSEGV handler would end the rank after hora's report with its exit code: leave the signal
  # to its default action there too.
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}handle_segv=0"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
  run 90 -np 3 "$PROBE" crash
  [ $rc -eq 139 ] || fail "rc=$rc, want 139 (SIGSEGV)"
  grep -q "^horarun: rank 1 on localhost was killed by signal 11 (SIGSEGV)$" err || fail "final message"
  # libhora's report: the rank, its host and pid, the signal, the address, the thread by name,
  # then native frames naming the program.
  grep -Eq "^\[1\]<stderr>:hora: rank 1 \(localhost, pid [0-9]+\): fatal signal SIGSEGV \(invalid memory access\) at address 0x0 in thread [0-9]+ 'probe-crasher'" err ||
    fail "no crash report naming rank 1, the address and the thread"
  grep -Eq "^\[1\]<stderr>:.*rank_probe\(" err || fail "the report's stack does not reach rank_probe"
  grep -q "^\[1\]<stderr>:hora: end of the crash report$" err || fail "the report is not complete"
  ok "a rank that segfaults reports its rank, thread and stack, then dies of SIGSEGV (rc 139)"
  # Turned off, the same crash prints no report and still ends the same way.
  HORA_CRASH_REPORT=0 run 90 -np 3 "$PROBE" crash
  [ $rc -eq 139 ] || fail "HORA_CRASH_REPORT=0: rc=$rc, want 139"
  grep -q "fatal signal" err && fail "HORA_CRASH_REPORT=0 still printed a report"
  ok "HORA_CRASH_REPORT=0: no report, the same SIGSEGV"
}

case_crash_report_kinds() {
  # A sanitizer build's stage sets its options before this runs: the sanitizer's runtime then
  # owns the signal stacks and instruments every frame of the recursion, so the overflow check
  # is for the plain build (the sent-signal check runs everywhere).
  local sanitized=${TSAN_OPTIONS:-}${ASAN_OPTIONS:-}
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}handle_segv=0:handle_sigfpe=0"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_sigfpe=0:use_sigaltstack=0"
  if [ -z "$sanitized" ]; then
  # A C stack overflow on the program's thread: the report runs on libhora's alternate signal
  # stack (without one the handler itself would fault and the rank die with no report).
  run 90 -np 2 "$PROBE" overflow
  [ $rc -eq 139 ] || fail "overflow: rc=$rc, want 139 (SIGSEGV)"
  grep -Eq "^\[1\]<stderr>:hora: rank 1 \(localhost, pid [0-9]+\): fatal signal SIGSEGV \(invalid memory access\) at address 0x[0-9a-f]+ in thread" err ||
    { cat err; fail "no crash report for a stack overflow"; }
  grep -q "^\[1\]<stderr>:hora: end of the crash report$" err || fail "overflow: the report is not complete"
  ok "a stack overflow gets its crash report, then SIGSEGV"
  else
    echo "not checked under a sanitizer: the stack overflow (the sent SIGFPE still is)"
  fi
  # A signal sent with kill(): no fault address (siginfo holds the sender's pid there), the
  # sender named instead.
  run 90 -np 2 "$PROBE" sent-fpe
  [ $rc -eq 136 ] || fail "sent-fpe: rc=$rc, want 136 (SIGFPE)"
  grep -Eq "^\[1\]<stderr>:hora: rank 1 \(localhost, pid [0-9]+\): fatal signal SIGFPE \(arithmetic fault\) in thread" err ||
    { cat err; fail "a sent SIGFPE was reported with an address, or not at all"; }
  grep -q "^\[1\]<stderr>:.*SIGFPE.*at address" err && fail "a sent SIGFPE printed a fault address"
  ok "a SIGFPE sent with kill() is reported without a fault address"
}

case_sigkill_launcher() {
  mkdir pids
  # Started directly (not under `timeout`) so that the signals below reach horarun itself;
  # the EXIT trap kills it if the test fails half-way.
  "$HORARUN" -np 3 "$PROBE" hang "$WORK/pids" >out 2>err &
  local hpid=$!
  BACKGROUND+=($hpid)
  wait_for 30 have_pidfiles pids 3 || fail "ranks did not start"
  # The job secret is in no process's command line.
  local secret
  secret=$(tr '\0' '\n' < /proc/"$(cat pids/0.pid)"/environ | sed -n 's/^HORA_SECRET=//p')
  [ ${#secret} -eq 64 ] || fail "could not read rank 0's HORA_SECRET"
  # (compared inside bash: a grep given the secret would itself have it on its command line)
  local cmdline
  for cmdline in /proc/[0-9]*/cmdline; do
    [[ "$( { tr '\0' ' ' < "$cmdline"; } 2>/dev/null)" == *"$secret"* ]] && fail "secret on the command line of $cmdline"
  done
  kill -KILL $hpid
  wait $hpid 2>/dev/null
  wait_for 10 pids_gone pids || fail "rank processes survived SIGKILL of horarun: $(cat pids/*.pid)"
  ok "SIGKILL of horarun leaves no rank behind; the secret is on no command line"
}

case_sigint() {
  mkdir pids
  # Started directly (not under `timeout`) so that the signals below reach horarun itself;
  # the EXIT trap kills it if the test fails half-way.
  "$HORARUN" -np 3 "$PROBE" hang "$WORK/pids" >out 2>err &
  local hpid=$!
  BACKGROUND+=($hpid)
  wait_for 30 have_pidfiles pids 3 || fail "ranks did not start"
  kill -INT $hpid
  wait_for 60 gone "$hpid" || fail "horarun did not end within 60 s of SIGINT"
  wait $hpid
  rc=$?
  [ $rc -eq 130 ] || fail "rc=$rc, want 130"
  pids_gone pids || fail "ranks still running after horarun exited"
  grep -q "interrupted by SIGINT" err || fail "no message"
  # The same for a plain command that never joins the rendezvous, by SIGTERM.
  rm -f pids/*
  "$HORARUN" -np 2 "$PROBE" sleep "$WORK/pids" >out 2>err &
  hpid=$!
  BACKGROUND+=($hpid)
  wait_for 30 have_pidfiles pids 2 || fail "plain ranks did not start"
  kill -TERM $hpid
  wait_for 60 gone "$hpid" || fail "horarun did not end within 60 s of SIGTERM"
  wait $hpid
  rc=$?
  [ $rc -eq 143 ] || fail "SIGTERM: rc=$rc, want 143"
  pids_gone pids || fail "plain ranks still running after SIGTERM"
  ok "SIGINT gives 130, SIGTERM 143, no rank left"
}

case_garbage() {
  run 90 -np 3 "$PROBE" garbage
  [ $rc -eq 0 ] || fail "rc=$rc"
  [ "$(grep -c 'garbage rejected=1 allreduce_ok=1' out)" -eq 3 ] || fail "job did not complete"
  grep -q "rejected a rendezvous connection" err || fail "the rejection was not reported"
  ok "garbage client rejected while the job completes"
}

case_start_timeout() {
  run 60 -np 3 --start-timeout 3 "$PROBE" noinit 1
  [ $rc -eq 1 ] || fail "rc=$rc, want 1"
  grep -q "rank 1 on localhost did not reach the rendezvous within 3 s" err || fail "message"
  grep -q -- "--start-timeout" err || fail "message must name --start-timeout"
  # No wall-clock bound: the message comes from the 3 s start timer alone, and run's deadline
  # ends a job that would wait for rank 1 forever.
  ok "--start-timeout names the missing rank"
}

case_connection_drop() {
  local tag="tag-$$-$RANDOM"
  run 60 -np 2 "$DROPPER" "$tag"
  [ $rc -eq 1 ] || fail "rc=$rc, want 1"
  grep -qE "^horarun: rank [01] on localhost lost its rendezvous connection .* and was still running 3 s later" err ||
    fail "message"
  # No wall-clock bound: the message proves the 3 s drop grace ended the job.
  pgrep -f "$tag" >/dev/null && fail "ranks still running after horarun exited"
  ok "a rank that lost its rendezvous connection but kept running ends the job"
}

escaped_sleepers() { pgrep -x -f 'sleep 297' >/dev/null 2>&1; }

case_escaped_background() {
  # Each rank starts a process that leaves its process group (setsid) and exits 0 at once. The
  # guard, a subreaper, must end that process too: nothing of the job may outlive it.
  run 60 -np 2 sh -c 'setsid sleep 297 </dev/null >/dev/null 2>&1 & echo started'
  [ $rc -eq 0 ] || fail "exit $rc"
  [ "$(grep -c '<stdout>:started$' out)" -eq 2 ] || fail "the ranks did not run"
  wait_for 5 eval '! escaped_sleepers' || { pkill -x -f 'sleep 297'; fail "a process that left the rank's group survived the job"; }
  ok "a background process that escaped the rank's process group ends with the rank"
}

case_early_exit() {
  # Rank 2 returns 0 right after init() while the others are in allreduces: they fail for lack
  # of a peer, and horarun's verdict names rank 2 as the likely cause, not only the first
  # rank that failed.
  run 60 -np 3 "$PROBE" exit 0 2
  [ $rc -ne 0 ] || fail "the job passed although rank 2 left early"
  tail -n 1 err | grep -q "rank 2 on localhost had already exited with code 0 while the job was running" ||
    fail "the verdict does not name rank 2: $(tail -n 1 err)"
  ok "a rank that exits 0 early is named in the verdict"
}

case_closed_stdout() {
  # horarun started with stdout closed (`>&-`): the ranks' stderr still arrives, nothing breaks.
  timeout -s KILL 30 "$HORARUN" -np 2 sh -c 'echo out; echo err >&2' >&- 2>err
  rc=$?
  [ $rc -eq 0 ] || fail "exit $rc with stdout closed"
  [ "$(grep -c '^\[[01]\]<stderr>:err$' err)" -eq 2 ] || fail "the ranks' stderr lines are missing"
  ok "stdout closed: the job runs, stderr intact"
}

case_slow_reader() {
  # A reader slower than the ranks gets every line, whole and in order per rank.
  timeout -s KILL 120 "$HORARUN" -np 2 sh -c 'seq 1 200000' 2>err | (sleep 2; cat) >out
  rc=${PIPESTATUS[0]}
  [ $rc -eq 0 ] || fail "horarun exited $rc"
  local r
  for r in 0 1; do
    grep "^\[$r\]<stdout>:" out | sed 's/^[^:]*://' >"lines$r"
    seq 1 200000 | cmp -s - "lines$r" || fail "rank $r's lines are missing or out of order ($(wc -l <"lines$r") lines)"
  done
  ok "a slow reader of horarun's stdout gets all 400000 lines in order"
}

rank_sleepers() { [ "$(pgrep -xc -f 'sleep 299' 2>/dev/null || true)" -ge "$1" ]; }
no_rank_sleepers() { ! pgrep -x -f 'sleep 299' >/dev/null 2>&1; }

case_stalled_reader_sigint() {
  # stdout goes to a FIFO whose reader never reads. The ranks print 2 MB each (30 times what
  # the FIFO holds) and sleep: horarun must still answer SIGINT, end the job and exit, giving
  # up on the unread output.
  mkfifo fifo
  sleep 300 <fifo >/dev/null &
  BACKGROUND+=($!)
  "$HORARUN" -np 2 sh -c 'head -c 2000000 /dev/zero | tr "\0" x | fold -w 100; exec sleep 299' >fifo 2>err &
  local pid=$!
  BACKGROUND+=("$pid")
  wait_for 30 rank_sleepers 2 || fail "the ranks did not get to sleep"
  kill -INT "$pid"
  wait_for 60 gone "$pid" || fail "horarun did not end within 60 s of SIGINT while its reader was stalled"
  wait "$pid"
  rc=$?
  [ $rc -eq 130 ] || fail "expected 130 after SIGINT, got $rc"
  wait_for 5 no_rank_sleepers || fail "ranks left running"
  grep -q "interrupted by SIGINT" err || fail "no interrupt message on stderr"
  ok "a stalled reader does not keep horarun from handling SIGINT"
}

# The rendezvous port of a running job, from the file its rank 0 wrote ($HORA_RENDEZVOUS).
rendezvous_port() { sed 's/.*://' "$WORK/rdv.0"; }

case_log_flood_sigint() {
  # stderr is a FIFO nobody reads; with --verbose every junk connection to the rendezvous port
  # is a log line (far more than the FIFO holds). horarun must keep its event loop: SIGINT ends
  # the job with 130 (it used to block in a write to stderr).
  mkfifo errfifo
  sleep 300 <errfifo >/dev/null &
  BACKGROUND+=($!)
  "$HORARUN" --verbose -np 2 sh -c 'echo "$HORA_RENDEZVOUS" >"$0/rdv.$HORA_RANK"; exec sleep 299' "$WORK" >out 2>errfifo &
  local pid=$!
  BACKGROUND+=("$pid")
  wait_for 30 rank_sleepers 2 || fail "the ranks did not get to sleep"
  [ -s "$WORK/rdv.0" ] || fail "rank 0 did not write HORA_RENDEZVOUS"
  timeout -s KILL 120 /usr/bin/python3 "$JUNK" "$(rendezvous_port)" 3000 flood >junk.out ||
    fail "the junk connections did not finish"
  kill -0 "$pid" 2>/dev/null || fail "horarun ended during the flood"
  kill -INT "$pid"
  wait_for 60 gone "$pid" || fail "horarun did not end within 60 s of SIGINT after the flood (blocked writing its log?)"
  wait "$pid"
  rc=$?
  [ $rc -eq 130 ] || fail "expected 130 after SIGINT, got $rc"
  wait_for 5 no_rank_sleepers || fail "ranks left running"
  ok "a log flood into an unread stderr does not keep horarun from handling SIGINT"
}

case_fd_flood_start() {
  # Under `ulimit -Sn 1024` (the hard limit higher), 2000 idle connections to the rendezvous port opened before the ranks
  # call hora::init(): the job still starts and passes (horarun raises its soft limit, the
  # server caps strangers).
  (ulimit -Sn 1024 && exec "$HORARUN" -np 2 sh -c 'echo "$HORA_RENDEZVOUS" >"$0/rdv.$HORA_RANK"; while [ ! -e "$0/go" ]; do sleep 0.05; done; exec "$1" garbage' "$WORK" "$PROBE") >out 2>err &
  local pid=$!
  BACKGROUND+=("$pid")
  wait_for 30 test -s "$WORK/rdv.0" || fail "rank 0 did not write HORA_RENDEZVOUS"
  # horarun raised its soft open-file limit to the hard one at start.
  local soft hard
  read -r soft hard < <(awk '/^Max open files/ {print $4, $5}' "/proc/$pid/limits")
  [ "$soft" = "$hard" ] || fail "horarun's open-file limit is $soft (hard $hard): not raised"
  mkfifo junkin
  /usr/bin/python3 "$JUNK" "$(rendezvous_port)" 2000 idle <junkin >junk.out &
  local junk=$!
  BACKGROUND+=("$junk")
  exec {hold}>junkin
  wait_for 120 grep -q "^open" junk.out || fail "the idle connections were not opened"
  touch "$WORK/go"
  wait_for 120 gone "$pid" || fail "the job did not end within 120 s"
  wait "$pid"
  rc=$?
  exec {hold}>&-
  [ $rc -eq 0 ] || fail "the job failed with 2000 idle connections under ulimit -n 1024: rc=$rc"
  [ "$(grep -c 'garbage rejected=1 allreduce_ok=1' out)" -eq 2 ] || fail "the ranks did not complete"
  ok "a job starts under ulimit -n 1024 with 2000 idle connections to its rendezvous port ($(cat junk.out))"
}

case_rank_fds() {
  # A local rank has only 0, 1 and 2 open: no listening socket, pipe or file of horarun's or the
  # guard's leaks into it, nor a descriptor horarun's caller left open (the
  # test holds one on purpose).
  exec {extra}</dev/null
  run 60 -np 2 /usr/bin/python3 "$LIST_FDS"
  exec {extra}<&-
  [ $rc -eq 0 ] || fail "rc=$rc"
  [ "$(grep -c '^\[[01]\]<stdout>:extra fds: none$' out)" -eq 2 ] ||
    fail "a rank has descriptors besides 0, 1, 2: $(grep 'extra fds' out | grep -v none | head -1)"
  ok "local ranks have only descriptors 0, 1 and 2"
}

# start_spinning_job ARGS...: horarun -np 3 ARGS rank_probe spin in the background (pid in
# $job), stopping rank 1 with SIGSTOP once every rank is in its allreduces.
start_spinning_job() {
  mkdir -p pids
  "$HORARUN" -np 3 "$@" "$PROBE" spin "$WORK/pids" >out 2>err &
  job=$!
  BACKGROUND+=("$job")
  wait_for 60 have_pidfiles pids 3 || fail "the ranks did not start"
  wait_for 30 grep -q "rank 2 ready" out || fail "the ranks are not ready"
  stopped=$(cat pids/1.pid)
  kill -STOP "$stopped"
}

# finish_spinning_job SECONDS: waits for the job; sets rc; lets rank 1 go if it is still there.
finish_spinning_job() {
  wait_for "$1" gone "$job" || { kill -CONT "$stopped" 2>/dev/null; fail "horarun did not end within $1 s"; }
  wait "$job"
  rc=$?
  kill -CONT "$stopped" 2>/dev/null
  wait_for 10 pids_gone pids || fail "ranks left running"
}

case_hung_rank_named() {
  # Rank 1 of 3 is SIGSTOPped inside its allreduces; the others time out (3 s) and fail. The
  # verdict names rank 1 and its state, not the healthy rank that timed out.
  start_spinning_job --gloo-timeout-seconds 3
  finish_spinning_job 60
  [ $rc -ne 0 ] || fail "the job passed with a stopped rank"
  grep -q "^horarun: rank 1 on localhost stopped responding (state T, stopped)" err ||
    fail "the verdict does not name the stopped rank 1"
  ok "a stopped rank is named when the others time out waiting for it (rc=$rc)"
}

case_stall_check_stopped_rank() {
  # The launcher's stall check: with a Gloo timeout far away (300 s), rank 1 SIGSTOPped is
  # warned about after --stall-check-warning-time-seconds and ends the job after
  # --stall-check-shutdown-time-seconds, by name.
  start_spinning_job --gloo-timeout-seconds 300 --stall-check-warning-time-seconds 1 \
    --stall-check-shutdown-time-seconds 4
  finish_spinning_job 100
  [ $rc -eq 1 ] || fail "expected exit 1 from the stall shutdown, got $rc"
  grep -q "stall check: rank 1 on localhost stopped responding (state T, stopped)" err ||
    fail "no stall warning naming rank 1"
  grep -q "^horarun: rank 1 on localhost stopped responding (state T, stopped) for .*--stall-check-shutdown-time-seconds" err ||
    fail "the verdict does not name rank 1 and the stall shutdown"
  ok "the stall check warns about and ends a job with a stopped rank"
}

case_stopped_rank_named_fast() {
  # A SIGSTOPped rank is named within seconds (the default stall check, Gloo timeout 300 s), long
  # before any timeout; a rank merely busy computing (spinning) is not named.
  start_spinning_job --gloo-timeout-seconds 300
  wait_for 8 grep -q "rank 1 on localhost is state T, stopped (pid $stopped) for" err ||
    { kill -CONT "$stopped"; kill "$job"; cat err; fail "rank 1 was not named within 8 s of SIGSTOP"; }
  grep -Eq "rank (0|2) on localhost is state" err && { kill -CONT "$stopped"; kill "$job"; fail "a running rank was named"; }
  kill -INT "$job"
  finish_spinning_job 60
  ok "a stopped rank is named within seconds, and only it"
}

# The CPU list --bind-to core must give local rank $1 of $2, from this shell's own CPUs.
expected_cpus() {
  PYTHONPATH=$INTEGRATION_DIR python3 - "$1" "$2" <<'PY'
import os, sys
import cpu_list
r, s = int(sys.argv[1]), int(sys.argv[2])
a = sorted(os.sched_getaffinity(0))
mine = [a[r % len(a)]] if len(a) < s else a[r * (len(a) // s):(r + 1) * (len(a) // s)]
print(cpu_list.format_runs(mine))
PY
}

case_bind_to() {
  local np r want got
  for np in 2 3; do
    run 60 -np "$np" -H "localhost:$np" --bind-to core \
      sh -c 'echo "$HORA_LOCAL_RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
    [ $rc -eq 0 ] || fail "--bind-to core at -np $np exited $rc: $(head -3 err)"
    for r in $(seq 0 $((np - 1))); do
      want=$(expected_cpus "$r" "$np")
      got=$(sed -n "s/^\[$r\]<stdout>:$r //p" out)
      [ "$got" = "$want" ] || fail "-np $np: local rank $r runs on CPUs '$got', expected '$want'"
    done
  done
  # Without the flag, a rank may run wherever the launcher may.
  want=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  run 60 -np 2 -H localhost:2 sh -c 'sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status'
  [ $rc -eq 0 ] || fail "-np 2 exited $rc"
  [ "$(grep -c "^\[[01]\]<stdout>:$want\$" out)" -eq 2 ] || fail "unbound ranks: $(cat out)"
  run 10 -np 2 --bind-to l3cache true
  [ $rc -eq 2 ] && grep -q -- "--bind-to" err || fail "--bind-to l3cache gave rc=$rc: $(cat err)"
  ok "--bind-to core gives each local rank its share of the host's CPUs"
}

# The CPU list --bind-to $1 --map-by $2 ("-": not given) must give local rank $3 of $4, from this
# host's sysfs and this shell's own CPUs (docs/launcher.md, "CPU binding").
expected_placement() {
  PYTHONPATH=$INTEGRATION_DIR python3 - "$@" <<'PY'
import glob, os, re, sys
import cpu_list
bind, mapping, r, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
allowed = sorted(os.sched_getaffinity(0))
sockets = {}
for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*"):
    f = d + "/topology/physical_package_id"
    pkg = int(open(f).read()) if os.path.exists(f) else 0
    sockets.setdefault(pkg, []).append(int(re.sub(r".*cpu", "", d)))
nodes = [cpu_list.parse(open(f).read()) for f in sorted(glob.glob("/sys/devices/system/node/node[0-9]*/cpulist"),
                                              key=lambda f: int(re.sub(r"\D", "", f.split("/")[-2])))]
def within(objs):
    return [o for o in ([c for c in sorted(obj) if c in allowed] for obj in objs) if o]
levels = {"socket": within([sockets[k] for k in sorted(sockets)]),
          "numa": within([x for x in nodes if x]) or [allowed]}
if bind == "-":
    bind = mapping
maplevel = mapping if mapping in ("socket", "numa") else ("numa" if mapping == "-" and n > 2 else "core")
if maplevel == "core":
    place, k, m = [allowed[r % len(allowed)]], 0, 1
else:
    objs = levels[maplevel]
    o = r % len(objs)
    place, k, m = objs[o], r // len(objs), (n - o + len(objs) - 1) // len(objs)
if bind == "core":
    mine = [place[k % len(place)]] if len(place) < m else place[k * (len(place) // m):(k + 1) * (len(place) // m)]
else:
    cands = [o for o in levels[bind] if set(o) & set(place)]
    mine = cands[k % len(cands)]
print(cpu_list.format_runs(mine))
PY
}

# check_placement BIND MAP NP: a job with those flags ("-": left out) binds each local rank where
# expected_placement says.
check_placement() {
  local bind=$1 map=$2 np=$3 r want got flags=()
  [ "$bind" = - ] || flags+=(--bind-to "$bind")
  [ "$map" = - ] || flags+=(--map-by "$map")
  run 60 -np "$np" -H "localhost:$np" "${flags[@]}" \
    sh -c 'echo "$HORA_LOCAL_RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
  [ $rc -eq 0 ] || fail "${flags[*]} at -np $np exited $rc: $(head -3 err)"
  for r in $(seq 0 $((np - 1))); do
    want=$(expected_placement "$bind" "$map" "$r" "$np")
    got=$(sed -n "s/^\[$r\]<stdout>:$r //p" out)
    [ "$got" = "$want" ] || fail "${flags[*]} -np $np: local rank $r runs on CPUs '$got', expected '$want'"
  done
}

case_bind_to_socket() {
  check_placement socket - 2
  check_placement numa - 2
  check_placement socket - 3
  check_placement - socket 3
  check_placement core socket 2
  check_placement numa socket 2
  check_placement socket core 2
  # A socket is its part inside the launcher's affinity mask (a cpuset): with one CPU allowed,
  # --bind-to socket binds to that CPU alone, not to the whole socket.
  if [ "$(nproc)" -ge 2 ]; then
    (
      taskset -pc "$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')" $BASHPID >/dev/null
      check_placement socket - 2
      only=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
      [ "$(grep -c "^\[[01]\]<stdout>:[01] $only\$" out)" -eq 2 ] ||
        fail "--bind-to socket under a one-CPU mask: $(cat out)"
    ) || exit 1
  fi
  # Without binding, the same mapping flags leave ranks unbound.
  want=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  run 60 -np 2 -H localhost:2 --map-by socket --bind-to none \
    sh -c 'sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status'
  [ $rc -eq 0 ] || fail "--map-by socket --bind-to none exited $rc: $(head -3 err)"
  [ "$(grep -c "^\[[01]\]<stdout>:$want\$" out)" -eq 2 ] || fail "--bind-to none: $(cat out)"
  ok "--bind-to/--map-by socket and numa place ranks as mpirun does on this host's topology"
}

case_scale() {
  # NP ranks on this host with a full Gloo mesh (3 contexts of NP - 1 pairs per rank: about
  # NP x 381 sockets at NP = 128). A loaded 2-core machine needs tens of seconds: the deadlines
  # are generous, and no time is asserted (bench/bench_scale.sh prints it).
  local np=$1
  local need=$((np * 6 + 128))  # per rank: up to 2 descriptors for each of 3 (np - 1) pairs
  [ "$(ulimit -n)" -ge "$need" ] || ulimit -n "$need" 2>/dev/null ||
    fail "-np $np needs ulimit -n >= $need (is $(ulimit -n), hard $(ulimit -Hn))"
  run 500 --start-timeout 300 -np "$np" -H "localhost:$np" "$ALLREDUCE_ONCE"
  [ $rc -eq 0 ] || fail "-np $np exited $rc: $(grep -v OMP_NUM_THREADS err | head -5)"
  grep -qx "\[0\]<stdout>:allreduce_once: $np ranks, sum $((np * (np + 1) / 2)) ok" out ||
    fail "rank 0 did not report the right sum: $(head -3 out)"
  ! grep -q "allreduce_once: rank" err || fail "a rank got a wrong sum: $(grep 'allreduce_once: rank' err | head -3)"
  ok "-np $np on one host: init(), one allreduce and shutdown() complete with the right sum"
}

# --max-restarts (torchrun's habit): a program that fails on attempts 0 and 1 (it reads
# TORCHELASTIC_RESTART_COUNT) and, on attempt 2, runs a real hora job (a new rendezvous).
write_flaky_program() {
  cat >flaky.sh <<EOF
#!/bin/sh
echo "attempt \$TORCHELASTIC_RESTART_COUNT of max \$TORCHELASTIC_MAX_RESTARTS rank \$HORA_RANK"
if [ "\$TORCHELASTIC_RESTART_COUNT" -lt 2 ]; then
  [ "\$HORA_RANK" = 0 ] && exit 3
  exec sleep 30
fi
exec "$ALLREDUCE_ONCE"
EOF
  chmod +x flaky.sh
}

case_max_restarts() {
  write_flaky_program
  run 120 -np 2 -H localhost:2 --max-restarts 2 ./flaky.sh
  [ $rc -eq 0 ] || fail "--max-restarts 2: rc=$rc, want 0"
  local a
  for a in 0 1 2; do
    [ "$(grep -c "<stdout>:attempt $a of max 2 rank" out)" -eq 2 ] ||
      fail "--max-restarts 2: attempt $a did not run both ranks once"
  done
  grep -qx "\[0\]<stdout>:allreduce_once: 2 ranks, sum 3 ok" out ||
    fail "attempt 2's hora job did not complete"
  grep -q "^horarun: restarting the job: attempt 2 of 3 starts at [0-9:.]*; attempt 1 ended after .*: rank 0 on localhost exited with code 3$" err ||
    fail "no restart line for attempt 2 of 3"
  grep -q "^horarun: restarting the job: attempt 3 of 3 starts at" err || fail "no restart line for attempt 3"
  [ "$(grep -c "restarting the job" err)" -eq 2 ] || fail "expected 2 restart lines"

  run 120 -np 2 -H localhost:2 --max-restarts 1 ./flaky.sh
  [ $rc -eq 3 ] || fail "--max-restarts 1: rc=$rc, want the failure's 3"
  [ "$(grep -c "<stdout>:attempt [01] of max 1 rank 0" out)" -eq 2 ] || fail "--max-restarts 1: not 2 attempts"
  ! grep -q "attempt 2 of max" out || fail "--max-restarts 1 ran a third attempt"
  grep -q "^horarun: restarting the job: attempt 2 of 2 starts at" err || fail "no restart line"
  grep -q "attempt 2 of 2 failed; no restart left (--max-restarts 1)" err || fail "no final line"

  # Without the flag: one attempt, TORCHELASTIC_RESTART_COUNT=0 and TORCHELASTIC_MAX_RESTARTS=0.
  run 60 -np 2 -H localhost:2 ./flaky.sh
  [ $rc -eq 3 ] || fail "without --max-restarts: rc=$rc, want 3"
  [ "$(grep -c "<stdout>:attempt 0 of max 0 rank" out)" -eq 2 ] || fail "without --max-restarts: bad environment"
  ! grep -q "restarting" err || fail "restarted without --max-restarts"
  ok "--max-restarts 2 succeeds on attempt 3 of 3; --max-restarts 1 exits 3 after 2 attempts"
}

# SIGINT while a failed attempt is ending (a rank that ignores SIGTERM keeps it open for the
# kill grace): horarun exits 130 and does not restart.
case_max_restarts_sigint() {
  mkdir pids
  cat >slow.sh <<EOF
#!/bin/sh
echo \$\$ >"$WORK/pids/\$TORCHELASTIC_RESTART_COUNT.\$HORA_RANK.pid"
if [ "\$HORA_RANK" = 0 ]; then touch "$WORK/failed"; exit 3; fi
trap '' TERM
exec sleep 30
EOF
  chmod +x slow.sh
  "$HORARUN" -np 2 -H localhost:2 --max-restarts 3 ./slow.sh >out 2>err &
  local hpid=$!
  BACKGROUND+=($hpid)
  wait_for 30 test -e failed || fail "attempt 0 did not fail"
  sleep 0.5
  kill -INT $hpid
  wait_for 60 gone "$hpid" || fail "horarun did not end within 60 s of SIGINT"
  wait $hpid
  rc=$?
  [ $rc -eq 130 ] || fail "rc=$rc, want 130"
  ! ls pids/1.* >/dev/null 2>&1 || fail "a second attempt started after SIGINT"
  ! grep -q "restarting the job" err || fail "restarted after SIGINT"
  grep -q "interrupted by SIGINT while attempt 1 of 4 was ending; not restarting" err ||
    fail "no message for the interrupt"
  pids_gone pids || fail "ranks still running after horarun exited"
  ok "SIGINT while a failed attempt ends: 130, no restart, no rank left"
}

# mpirun's output options: Open MPI's `[1,RANK]<stdout>:` tag, its timestamp in
# front, stderr merged into stdout, -wdir, and --display-map's rank table.
case_mpirun_output() {
  run 30 --tag-output -np 2 sh -c 'echo "hi $HORA_RANK"'
  [ $rc -eq 0 ] || fail "--tag-output: rc=$rc: $(cat err)"
  grep -qx '\[1,0\]<stdout>:hi 0' out && grep -qx '\[1,1\]<stdout>:hi 1' out ||
    fail "--tag-output: want [1,RANK]<stdout>:, got: $(cat out)"
  run 30 --tag-output --timestamp-output -np 1 sh -c 'echo hi; echo oops >&2'
  grep -qE '^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} [0-9]{4}\[1,0\]<stdout>:hi$' out ||
    fail "--timestamp-output: got: $(cat out)"
  grep -qE '^[A-Z][a-z]{2} .*[0-9]{4}\[1,0\]<stderr>:oops$' err || fail "stderr: $(cat err)"
  run 30 --merge-stderr-to-stdout -np 1 sh -c 'echo oops >&2'
  grep -qx '\[0\]<stderr>:oops' out || fail "--merge-stderr-to-stdout: out: $(cat out)"
  ! grep -q oops err || fail "--merge-stderr-to-stdout: still on stderr"
  mkdir -p work
  run 30 -wdir work -np 1 pwd
  grep -qx "\[0\]<stdout>:$PWD/work" out || fail "-wdir: got: $(cat out)"
  run 30 --display-map -np 2 true
  [ $rc -eq 0 ] && grep -q 'local_rank' out || fail "--display-map printed no rank table: $(cat out)"
  ok "--tag-output, --timestamp-output, --merge-stderr-to-stdout, -wdir, --display-map"
}

# mismatch TRANSPORT NP: mismatch_probe's every case (one synchronous collective, the last rank
# passing another count, type, op or root) over shared memory (shm), Gloo (gloo: HORA_SHM=0,
# small ops on sync pairs) or Gloo without sync pairs (gloo-async). Every rank must throw
# MismatchError whose text names the collective and the ranks that disagree: no Gloo abort, no
# hang (HORA_TIMEOUT_SECONDS=20 turns one into a TimeoutError, which fails here), no "no error".
MISMATCH_CASES="allreduce-count-small allreduce-count-large allreduce-count-zero allreduce-count-mixed allreduce-type
  allreduce-op allgather-counts-small allgather-counts-large broadcast-count-small
  broadcast-count-large broadcast-count-zero broadcast-root broadcast-type alltoall-splits-small
  alltoall-splits-large reducescatter-count-small reducescatter-count-large reducescatter-count-zero
  reducescatter-op barrier-vs-allreduce"
case_mismatch() {
  local transport=$1 np=$2 odd=$(($2 - 1)) c r line op want flags=()
  case $transport in
    shm) ;;
    gloo) flags=(-x HORA_SHM=0) ;;
    gloo-async) flags=(-x HORA_SHM=0 -x HORA_GLOO_SYNC=0) ;;
  esac
  for c in $MISMATCH_CASES; do
    rm -rf done && mkdir done
    run 90 -np "$np" -H "localhost:$np" -x HORA_TIMEOUT_SECONDS=20 "${flags[@]}" \
      "$MISMATCH" "$PWD/done" "$c"
    [ $rc -eq 0 ] || fail "$transport -np $np $c: rc=$rc"
    op=${c%%-*}
    [ "$c" = barrier-vs-allreduce ] && op="(barrier|allreduce)"
    for r in $(seq 0 "$odd"); do
      line=$(grep "^\[$r\]<stderr>:rank $r: " err)
      [ -n "$line" ] || fail "$transport -np $np $c: rank $r printed nothing"
      want="MismatchError: rank $r on localhost: $op .*over the global group.* failed: "
      echo "$line" | grep -Eq "$want" || fail "$transport -np $np $c: rank $r: $line"
      case "$transport:$c" in
        *:alltoall-*) want="send_splits and recv_splits disagree" ;;
        shm:*) want="local rank [0-9] \(rank ([0-9])\) called a different collective, or passed other counts" ;;
        *) want="rank [0-9] called .*, but rank [0-9] called " ;;
      esac
      echo "$line" | grep -Eq "$want" || fail "$transport -np $np $c: rank $r: $line"
      # The ranks named: the odd one (or, for the odd one itself, another one).
      case "$transport:$c" in
        *:alltoall-*) ;;
        shm:*) [ "$r" = "$odd" ] && want="local rank 0 \(rank 0\)" || want="\(rank $odd\)" ;;
        *) want="rank $odd called" ;;
      esac
      echo "$line" | grep -Eq "$want" || fail "$transport -np $np $c: rank $r names the wrong rank: $line"
    done
  done
  ok "$transport -np $np: every rank of every mismatched collective got MismatchError naming it"
}

"case_${1//-/_}" "${@:2}"
