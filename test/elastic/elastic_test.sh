#!/bin/bash
# Elastic jobs (docs/elastic.md): `elastic_test.sh CASE`. A case on test hosts brings up its own
# network-namespace hosts with sshd (scripts/testhosts.sh up --index auto) and tears them down on
# exit, even on failure; it exits 77 (skip) without root or `ip netns`. The local_* cases run on
# this machine only.
# Environment: HORARUN, ELASTIC_TRAIN (examples/elastic_train), TESTHOSTS (scripts/testhosts.sh),
# PYTHONPATH (build/python for hora.torch), PY_ELASTIC (the elastic PyTorch example), HVD_RESIZE
# (test/horovod/horovod_elastic_resize.py) and HOROVOD_ARCHIVE (unpack_horovod) for the Horovod
# cases.
# The hosts the job may use are a file the discovery script prints; a case edits it to make a
# host come or go. Every horarun run has a deadline; waits poll a condition with a deadline.
set -u
CASE=${1:?usage: elastic_test.sh CASE}

# fail, ok, wait_for, gone, begin_work, hosts_up
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
PID=""
LEFT=""  # pids a case started outside horarun (killed on exit)
cleanup_case() {
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
  [ -n "$LEFT" ] && kill -KILL $LEFT 2>/dev/null
  return 0
}
begin_work elastic_test

# up N: N test hosts h1..hN (skipped without root, `ip netns` or sshd); sets INDEX and CONFIG.
up() {
  need_netns
  need_sshd
  hosts_up "$TESTHOSTS" "$1"
}

# hosts LINE...: what the discovery script prints from now on (no line: prints nothing).
hosts() { printf '%s\n' "$@" | grep . >"$WORK/hosts.new"; mv "$WORK/hosts.new" "$WORK/hosts"; }
# The script also counts its runs in ./runs.
printf '#!/bin/sh\necho run >>%s/runs\ncat %s/hosts\n' "$WORK" "$WORK" >"$WORK/discover.sh"
chmod +x "$WORK/discover.sh"
runs() { wc -l <"$WORK/runs" 2>/dev/null || echo 0; }
# runs_past N: the discovery script has run more than N times.
runs_past() { [ "$(runs)" -gt "$1" ]; }

# start ARGS...: horarun in the background (output in ./out and ./err), with the test hosts'
# ssh_config (once they are up) and the discovery script.
start() {
  start_hosts --host-discovery-script "$WORK/discover.sh" "$@"
}
# start_hosts ARGS...: the same without the discovery script (-H in ARGS).
start_hosts() {
  "$HORARUN" ${CONFIG:+--ssh-config "$CONFIG"} "$@" >out 2>err </dev/null &
  PID=$!
}
# finish SECONDS: waits for horarun; sets rc.
finish() {
  wait_for "$1" gone "$PID" || fail "horarun still running after $1 s: $(tail -5 err)"
  wait "$PID"
  rc=$?
  PID=""
}

# pids_on HOST [COMM]: processes in HOST's namespace other than sshd (with COMM: only those).
pids_on() {
  local pid comm
  for pid in $(ip netns pids "hora$INDEX-$1" 2>/dev/null); do
    comm=$(cat /proc/"$pid"/comm 2>/dev/null) || continue
    [ "$comm" = sshd ] && continue
    if [ $# -lt 2 ] || [ "$comm" = "$2" ]; then echo "$pid"; fi
  done
}
nothing_on() { for h in "$@"; do [ -z "$(pids_on "$h")" ] || return 1; done; }
reached_step() { grep -q "step $1 size" out 2>/dev/null; }
# Shared-memory segments of hora's made since the case began (other jobs' are not this one's).
ls /dev/shm/ 2>/dev/null | grep '^hora-' >"$WORK/shm.before"
new_segments() { ls /dev/shm/ 2>/dev/null | grep '^hora-' | grep -vxF -f "$WORK/shm.before"; }
no_segments() { [ -z "$(new_segments)" ]; }

# worker_pid ID: this machine's elastic_train process of worker ID (HORA_WORKER_ID) of this
# case's horarun.
worker_pid() {
  local pid p
  for pid in $(pgrep -x elastic_train); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "HORA_WORKER_ID=$1" || continue
    p=$pid
    while [ -n "$p" ] && [ "$p" -gt 1 ]; do
      [ "$p" = "$PID" ] && { echo "$pid"; return 0; }
      p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
    done
  done
  return 1
}
# dead PID: gone, or a zombie (an orphan's zombie may wait for a PID 1 that never reaps it).
dead() { gone "$1" || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
# none_running PATTERN: no process whose command line matches PATTERN (pgrep -f).
none_running() { ! pgrep -f "$1" >/dev/null; }
# listening PID: the TCP sockets the process listens on (local address:port, one a line).
listening() { ss -Htln -p 2>/dev/null | grep "pid=$1," | awk '{print $4}'; }
# formed N: round N of the job has formed.
formed() { grep -q "elastic: round $1 formed" err; }

# check_done SIZE: every rank of the last round (SIZE ranks) printed the same right weights.
check_done() {
  local n sums
  [ $rc -eq 0 ] || fail "horarun exited $rc: $(tail -5 err)"
  n=$(grep -cE "^\[[0-9]+\]<stdout>:done: rank [0-9]+ of $1, .* right$" out)
  [ "$n" -eq "$1" ] || fail "$n of $1 ranks finished right at size $1: $(grep done: out)"
  sums=$(grep -oE "done: .* weights [0-9a-f]+" out | awk '{print $NF}' | sort -u | wc -l)
  [ "$sums" -eq 1 ] || fail "the ranks' weights differ: $(grep done: out)"
}

case_shrink() {
  up 2
  hosts h1:2 h2:2
  start -np 4 --min-np 2 "$ELASTIC_TRAIN" --steps 120 --step-ms 40
  wait_for 120 reached_step 15 || fail "the job did not reach step 15: $(tail -5 err)"
  # h2 goes away: its workers die (SIGKILL) and discovery stops listing it. The kill comes
  # first: a discovery run between the two would stop h2's workers itself. The reset names
  # either cause: the lost workers, or (a loaded machine, discovery running before the launcher
  # hears of the kill) h2 no longer listed.
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
  hosts h1:2
  finish 180
  check_done 2
  grep -q "elastic: round 1: .*\bh2\b.*; new size 2 on h1:2" err || fail "no reset line: $(cat err)"
  grep -q "elastic: round 1 formed: 2 ranks at the rendezvous" err || fail "no formed line"
  wait_for 10 nothing_on h1 h2 || fail "processes left: h1 $(pids_on h1) h2 $(pids_on h2)"
  wait_for 10 no_segments || fail "shared memory left: $(new_segments)"
  ok "shrink: 2x2 -> 1x2 after h2's workers were killed; same weights on both, exit 0"
}

case_grow() {
  up 2
  hosts h1:2
  start -np 2 --min-np 2 --max-np 4 "$ELASTIC_TRAIN" --steps 150 --step-ms 40
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  hosts h1:2 h2:2
  finish 180
  check_done 4
  grep -q "elastic: round 1: host h2 joined; new size 4 on h1:2, h2:2" err ||
    fail "no growth line: $(cat err)"
  grep -q "step [0-9]* size 4" out || fail "no step at size 4"
  wait_for 10 nothing_on h1 h2 || fail "processes left"
  ok "grow: 1x2 -> 2x2 when discovery listed h2; finished at size 4, exit 0"
}

case_min_np_timeout() {
  up 2
  hosts h1:2 h2:2
  start -np 4 --min-np 4 --elastic-timeout 3 "$ELASTIC_TRAIN" --steps 400 --step-ms 40
  wait_for 120 reached_step 5 || fail "the job did not reach step 5: $(tail -5 err)"
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
  hosts h1:2
  finish 120
  [ $rc -ne 0 ] || fail "horarun exited 0 below --min-np"
  grep -q "^horarun: elastic: waited 3 s (--elastic-timeout) for --min-np 4 slots; had 2 (h1:2); blacklisted: h2" err ||
    fail "no clear error: $(tail -3 err)"
  wait_for 10 nothing_on h1 h2 || fail "processes left"
  ok "below --min-np past --elastic-timeout: ends naming what it waited for"
}

case_reset_limit() {
  up 2
  hosts h1:2 h2:2
  start -np 4 --min-np 2 --reset-limit 0 "$ELASTIC_TRAIN" --steps 400 --step-ms 40
  wait_for 120 reached_step 5 || fail "the job did not reach step 5: $(tail -5 err)"
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
  hosts h1:2
  finish 120
  [ $rc -eq 137 ] || fail "expected the killed worker's code 137, got $rc"
  grep -q "^horarun: elastic: the job needs reset 1 (.*), past --reset-limit 0" err ||
    fail "no clear error: $(tail -3 err)"
  wait_for 10 nothing_on h1 h2 || fail "processes left"
  ok "--reset-limit reached: ends naming the limit, with the lost worker's code"
}

# h2 drops off the network mid-job (its only interface goes down: no FIN, no RST). The
# survivors' collectives time out or are interrupted; horarun notices the lost host through its
# rendezvous connections' keepalive and treats it as dead: the job shrinks to h1 and finishes.
case_network_cut() {
  up 2
  hosts h1:2 h2:2
  # 400 steps: the cut at step 10 stops every rank's collectives until the reset, so however long
  # horarun takes to notice, the job cannot end before it (and 1000 steps only made it longer).
  start -np 4 --min-np 2 "$ELASTIC_TRAIN" --steps 400 --step-ms 60
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  ip netns exec "hora$INDEX-h2" ip link set eth0 down || fail "cannot take h2's eth0 down"
  # Discovery still lists h2: only the cut itself tells horarun.
  finish 240
  check_done 2
  # Whichever notices first: the rendezvous connection's loss, or h2's agent falling silent
  # (HORA_AGENT_TIMEOUT_SECONDS), which ends its link and so its ranks (exit 255).
  grep -qE "elastic: round 1: .* on h2 (lost its rendezvous connection .*|exited with code 255); new size 2 on h1:2" err ||
    fail "no reset line: $(cat err)"
  grep -q "the agent on h2 .* stopped answering\|lost its rendezvous connection" err ||
    fail "no line says why h2 was lost: $(cat err)"
  ip netns exec "hora$INDEX-h2" ip link set eth0 up
  wait_for 10 nothing_on h1 || fail "processes left on h1: $(pids_on h1)"
  ok "a host cut off the network mid-job is treated as lost: the job finishes on h1 at size 2"
}

# The same with hora.torch: examples/pytorch_fashion_mnist_elastic.py (Horovod's elastic style,
# TorchState, ElasticSampler) at 2x2; h2's workers die after the first epoch.
case_shrink_torch() {
  /usr/bin/python3 -c 'import hora.torch' 2>/dev/null || { echo "skip: hora.torch is not built"; exit 77; }
  up 2
  hosts h1:2 h2:2
  start -np 4 --min-np 2 /usr/bin/python3 "$PY_ELASTIC" --epochs 2 --batches-per-epoch 150 \
    --batches-per-commit 5 --batches-per-host-check 5
  wait_for 240 grep -q "^\[0\]<stdout>:rank 0 epoch 1 (size 4)" out ||
    fail "epoch 1 did not end at size 4: $(tail -5 err)"
  kill -KILL $(pids_on h2 python3) || fail "no worker on h2"
  hosts h1:2
  finish 300
  [ $rc -eq 0 ] || fail "horarun exited $rc: $(tail -5 err)"
  grep -q "elastic: round 1: .*\bh2\b.*; new size 2 on h1:2" err || fail "no reset line: $(cat err)"
  grep -q "rank [01]: reset, now 2 ranks" out || fail "the ranks did not reset: $(tail out)"
  grep -q "^\[0\]<stdout>:rank 0 epoch 2 (size 2)" out || fail "epoch 2 did not run at size 2"
  local sums
  sums=$(grep -oE "parameter checksum crc32 [0-9a-f]+" out | sort | uniq -c)
  [ "$(echo "$sums" | wc -l)" -eq 1 ] && echo "$sums" | grep -q "^ *2 " ||
    fail "not 2 equal checksums: $sums"
  wait_for 10 nothing_on h1 h2 || fail "processes left: h1 $(pids_on h1) h2 $(pids_on h2)"
  wait_for 10 no_segments || fail "shared memory left: $(new_segments)"
  ok "hora.torch shrink: 2x2 -> 1x2 after epoch 1; epoch 2 at size 2, equal weights, exit 0"
}

# A blacklisted host comes back when its cooldown ends, with -H (no discovery script): the job
# waits below --min-np 2 after h2's worker is killed, and h2 rejoins once its 2-3 s are over.
case_cooldown_hosts() {
  up 2
  start_hosts -H h1:1,h2:1 -np 2 --min-np 2 --blacklist-cooldown-range 2 3 --elastic-timeout 60 \
    "$ELASTIC_TRAIN" --steps 300 --step-ms 40
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
  finish 180
  check_done 2
  grep -q "elastic: host h2 is back after its cooldown" err || fail "h2 never came back: $(cat err)"
  grep -q "elastic: round 1: .* on h2 .*; new size 2 on h1:1, h2:1" err || fail "no round 1 on both hosts"
  grep -q "waited .* (--elastic-timeout)" err && fail "the job waited out --elastic-timeout"
  wait_for 10 nothing_on h1 h2 || fail "processes left: h1 $(pids_on h1) h2 $(pids_on h2)"
  ok "-H: h2 is back after its cooldown and the job finishes at size 2"
}

# The same with a discovery script whose listing never changes: the job shrinks to h1, and grows
# back onto h2 when its cooldown ends.
case_cooldown_discovery() {
  up 2
  hosts h1:1 h2:1
  start -np 2 --min-np 1 --blacklist-cooldown-range 2 3 "$ELASTIC_TRAIN" --steps 400 --step-ms 40
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
  finish 180
  check_done 2
  grep -q "elastic: round 1: .* on h2 .*; new size 1 on h1:1" err || fail "no shrink: $(cat err)"
  grep -q "elastic: host h2 is back after its cooldown" err || fail "h2 never came back"
  grep -q "elastic: round 2: a host is back after its cooldown; new size 2 on h1:1, h2:1" err ||
    fail "no growth back onto h2: $(cat err)"
  wait_for 10 nothing_on h1 h2 || fail "processes left: h1 $(pids_on h1) h2 $(pids_on h2)"
  ok "discovery: h2 is back after its cooldown, the job grows to 2 without a new listing"
}

# A worker stopped by SIGSTOP holds the next round: it is named with its state at once, and
# treated as lost at --elastic-timeout. Here the job is this machine only, so losing it ends the
# job (its host is blacklisted); what matters is that it ends, and says why.
case_local_stopped_worker() {
  hosts localhost:3
  start -np 3 --min-np 1 --elastic-timeout 6 "$ELASTIC_TRAIN" --steps 2000 --step-ms 40
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  local stopped
  stopped=$(worker_pid 1) || fail "no worker 1"
  LEFT=$stopped
  kill -STOP "$stopped"
  hosts localhost:2  # a new round, which worker 1 cannot join
  wait_for 30 grep -q "elastic: round 1 waits for worker 1 (rank 1) on localhost, whose process $stopped is in state T, stopped" err ||
    fail "the stopped worker was not named: $(tail -5 err)"
  finish 60
  [ $rc -ne 0 ] || fail "horarun exited 0"
  grep -q "worker 1 (rank 1) on localhost did not join round 1 within 6 s (--elastic-timeout): its process $stopped is in state T, stopped" err ||
    fail "no line names the stopped worker as lost: $(tail -5 err)"
  wait_for 10 dead "$stopped" || fail "the stopped worker was left: $stopped"
  ok "a stopped worker is named at once and lost at --elastic-timeout; the job ends"
}

# A worker stopped while its round runs (no new round forming) is named within seconds, as in a
# fixed job; the running ones are not.
case_local_stopped_running() {
  hosts localhost:2
  start -np 2 --min-np 1 "$ELASTIC_TRAIN" --steps 2000 --step-ms 40
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  local stopped
  stopped=$(worker_pid 1) || fail "no worker 1"
  LEFT=$stopped
  kill -STOP "$stopped"
  wait_for 8 grep -q "elastic: worker 1 (rank 1) on localhost is state T, stopped (pid $stopped)" err ||
    { kill -CONT "$stopped"; fail "the stopped worker was not named within 8 s: $(tail -5 err)"; }
  grep -q "worker 0 (rank 0) on localhost is state" err && fail "the running worker was named"
  kill -CONT "$stopped"
  kill -INT "$PID"
  finish 60
  ok "a worker stopped mid-round is named within seconds, and only it"
}

# The same on test hosts: h1's worker is stopped and h2 shrinks to 1 slot. Round 1 (h1 and h2's
# first worker) cannot form; at --elastic-timeout h1's worker is lost, and the job finishes on h2.
case_stopped_worker() {
  up 2
  hosts h1:1 h2:2
  start -np 3 --min-np 1 --elastic-timeout 8 "$ELASTIC_TRAIN" --steps 400 --step-ms 40
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  kill -STOP $(pids_on h1 elastic_train) || fail "no worker on h1"
  hosts h1:1 h2:1
  finish 180
  check_done 1
  # h1's agent reports the worker's state (a STATE frame), so it is named as a local one is.
  grep -Eq "worker 0 \(rank 0\) on h1 did not join round 1 within 8 s \(--elastic-timeout\): its process [0-9]+ is in state T, stopped" err ||
    fail "no line names the stopped worker and its state: $(tail -5 err)"
  grep -q "elastic: round 2: .* on h1 did not join round 1 .*; new size 1 on h2:1" err ||
    fail "no round 2 on h2: $(cat err)"
  wait_for 10 nothing_on h1 h2 || fail "processes left: h1 $(pids_on h1) h2 $(pids_on h2)"
  ok "a stopped worker on h1 holds round 1 only until --elastic-timeout; the job finishes on h2"
}

# Each round's server stops once the next round formed, and a job of this machine listens on
# loopback only (not 0.0.0.0) even with a discovery script.
case_local_one_listener() {
  hosts localhost:1
  start -np 1 --min-np 1 --max-np 2 "$ELASTIC_TRAIN" --steps 3000 --step-ms 40
  wait_for 120 reached_step 5 || fail "the job did not reach step 5: $(tail -5 err)"
  local n fds=0
  for n in 1 2 3 4 5 6; do
    if [ $((n % 2)) -eq 1 ]; then hosts localhost:2; else hosts localhost:1; fi
    wait_for 120 formed $n || fail "round $n did not form: $(tail -5 err)"
    [ $n -eq 2 ] && fds=$(ls "/proc/$PID/fd" | wc -l)
  done
  local socks
  socks=$(listening "$PID")
  [ "$(echo "$socks" | grep -c .)" -eq 1 ] ||
    fail "after 6 resets horarun listens on $(echo "$socks" | grep -c .) sockets: $socks"
  echo "$socks" | grep -q "^127\.0\.0\.1:" || fail "horarun listens on $socks, not loopback"
  # Rounds 2 and 6 have the same single worker: horarun holds no more descriptors in 6 (a
  # stopped worker's pipes may take a moment to close).
  fds_at_most() { [ "$(ls "/proc/$PID/fd" | wc -l)" -le "$1" ]; }
  wait_for 10 fds_at_most "$fds" ||
    fail "horarun held $fds descriptors at round 2, $(ls "/proc/$PID/fd" | wc -l) at round 6"
  kill -TERM "$PID"
  finish 60
  ok "after 6 resets horarun holds one listening socket, on loopback ($socks), and $fds descriptors as at round 2"
}

# This machine under a second name in the discovery script's listing is ignored, with a warning.
case_local_second_name() {
  hosts localhost:1
  start -np 1 --min-np 1 --max-np 3 "$ELASTIC_TRAIN" --steps 200 --step-ms 40
  wait_for 120 reached_step 5 || fail "the job did not reach step 5: $(tail -5 err)"
  hosts localhost:1 127.0.0.1:2
  wait_for 60 grep -q "elastic: the discovery script lists 127.0.0.1:2, which is this machine, already a host of the job as localhost; ignoring it" err ||
    fail "no warning: $(tail -5 err)"
  finish 120
  check_done 1
  grep -q "elastic: round 1" err && fail "the job changed: $(grep 'round 1' err)"
  ok "127.0.0.1 beside localhost is ignored with a warning; the job stays at size 1"
}

# An unresolvable host in the first listing is left out when the others have --min-np slots.
# The job runs in a network namespace of its own (loopback only), so the lookup of
# nosuchhost.invalid sends nothing anywhere.
case_local_unresolvable_first() {
  [ "$(id -u)" -eq 0 ] || { echo "skip: needs root (a network namespace)"; exit 77; }
  hosts localhost:2 nosuchhost.invalid:2
  timeout -s KILL 120 unshare -n sh -c 'ip link set lo up && exec "$@"' sh \
    "$HORARUN" --host-discovery-script "$WORK/discover.sh" -np 2 --min-np 2 \
    "$ELASTIC_TRAIN" --steps 20 --step-ms 10 >out 2>err </dev/null
  rc=$?
  check_done 2
  grep -q "elastic: leaving out the discovery script's host that cannot be resolved: nosuchhost.invalid: " err ||
    fail "no warning: $(cat err)"
  ok "nosuchhost.invalid left out of the first listing with a warning; the job ran on localhost"
}

# Shrinking a host's slots stops its highest local ranks at the next round, saying why.
case_local_shrink_slots() {
  hosts localhost:2
  start -np 2 --min-np 1 "$ELASTIC_TRAIN" --steps 200 --step-ms 40
  wait_for 120 reached_step 10 || fail "the job did not reach step 10: $(tail -5 err)"
  hosts localhost:1
  finish 120
  check_done 1
  grep -q "elastic: round 1: host localhost now has 1 slot, not 2: stopping the surplus worker 1 (rank 1, local rank 1); new size 1 on localhost:1" err ||
    fail "no reset line: $(cat err)"
  ok "localhost:2 -> localhost:1: worker 1 (local rank 1) stopped at round 1; finished at size 1"
}

# A listing that is empty, or every host at :0, for a few reads does not stop a healthy job.
case_local_empty_listing() {
  hosts localhost:2
  start -np 2 --min-np 2 "$ELASTIC_TRAIN" --steps 300 --step-ms 40
  wait_for 120 reached_step 5 || fail "the job did not reach step 5: $(tail -5 err)"
  local n
  n=$(runs)
  hosts  # nothing
  wait_for 60 runs_past $((n + 2)) || fail "the discovery script stopped running"
  hosts localhost:0
  n=$(runs)
  wait_for 60 runs_past $((n + 2)) || fail "the discovery script stopped running"
  hosts localhost:2
  finish 120
  check_done 2
  grep -q "elastic: --host-discovery-script listed no host (no line, or only hosts with 0 slots); the 2 running workers go on" err ||
    fail "no warning: $(cat err)"
  grep -q "elastic: round 1" err && fail "the job was reset: $(grep 'round 1' err)"
  ok "an empty listing, then localhost:0, for a few reads: the job went on at size 2"
}

# A NUL byte in a line: the message keeps its reason and shows the byte.
case_local_nul_line() {
  printf 'local\000host:2\n' >"$WORK/hosts"
  run 60 --host-discovery-script "$WORK/discover.sh" -np 2 "$ELASTIC_TRAIN" --steps 5
  [ $rc -eq 2 ] || fail "expected 2, got $rc"
  grep -qF "line 1: 'local\0host:2' is not host:slots (it holds a NUL byte); the job cannot start without its hosts" err ||
    fail "the message lost its reason: $(cat -v err)"
  ok "a NUL byte in a line is named, with the rest of the message"
}

# localhost:0 with -np 2: the job waits for --min-np 2 slots, and says so with the right numbers.
case_local_zero_slots() {
  hosts localhost:0
  run 60 --host-discovery-script "$WORK/discover.sh" -np 2 --elastic-timeout 2 "$ELASTIC_TRAIN" --steps 5
  [ $rc -eq 1 ] || fail "expected 1, got $rc: $(cat err)"
  grep -q "(-np 1)" err && fail "says -np 1: $(cat err)"
  grep -q "^horarun: elastic: waited 2 s (--elastic-timeout) for --min-np 2 slots; had 0 (no host)" err ||
    fail "no clear message: $(cat err)"
  ok "localhost:0 with -np 2: waited for --min-np 2 slots and said so"
}

# A discovery script that leaves a setsid child holding its stdout: the child is killed a moment
# after the script exits (not at the 30 s deadline), and a warning names it.
case_local_setsid_child() {
  command -v setsid >/dev/null || { echo "skip: no setsid"; exit 77; }
  printf '#!/bin/sh\nsetsid sleep 300 &\necho $! >>%s/leftovers\ncat %s/hosts\n' "$WORK" "$WORK" \
    >"$WORK/discover.sh"
  hosts localhost:1
  start -np 1 --min-np 1 "$ELASTIC_TRAIN" --steps 40 --step-ms 40
  wait_for 60 reached_step 1 || fail "the job did not start: $(tail -5 err)"
  finish 60
  LEFT=$(cat "$WORK/leftovers")
  check_done 1
  grep -q "left process [0-9]* (sleep) outside its process group (setsid?) holding its output; killed it" err ||
    fail "no warning: $(cat err)"
  local p
  for p in $LEFT; do wait_for 10 dead "$p" || fail "the script's setsid child $p was left"; done
  ok "the setsid children of $(echo "$LEFT" | wc -w) discovery runs were killed and named"
}


# hvd_steps SIZE: rank 0 of the Horovod program printed a step at SIZE ranks.
hvd_steps() { grep -qE "^\[0\]<stdout>:step [0-9]+ size $1\$" out 2>/dev/null; }

# A real Horovod elastic program (hvd.elastic.run, TorchState, a commit every step) grows from 2
# to 4 ranks when the listing gains slots: rank 0 is told of the new hosts, every survivor resets
# at its next commit and waits at the barrier for the others, the new workers join, and all four
# end with the same weights.
case_local_horovod_grow() {
  unpack_horovod
  hosts localhost:2
  start --verbose --horovod-elastic -np 2 --min-np 2 --max-np 4 "$PYTHON" "$HVD_RESIZE" 40 4
  wait_for 180 hvd_steps 2 || fail "the job did not train at size 2: $(tail -5 err; tail -5 out)"
  hosts localhost:4
  finish 240
  check_done 4
  hvd_steps 4 || fail "no step at size 4: $(tail -5 out)"
  local r
  for r in 0 1; do
    grep -qE "<stdout>:reset rank $r size 4\$" out || fail "rank $r did not reset to size 4: $(grep reset out)"
  done
  grep -q "elastic: round 1 formed: 4 ranks" err || fail "round 1 did not form: $(cat err)"
  grep -q "told Horovod worker localhost:0 .* that hosts changed" err ||
    fail "rank 0 was not notified: $(cat err)"
  ok "a Horovod elastic program grew from 2 to 4 ranks (notified, reset, barrier) and ended with equal weights"
}


# The same program without --horovod-elastic: its Gloo asks the round's hora rendezvous (where
# HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT point) for Horovod's HTTP rendezvous; horarun recognises the
# request and ends the job naming the flag, rather than the workers' Gloo aborting after its 30 s
# store timeout (which ended such a job with "no worker of round 0 is left"). No worker is left.
case_local_horovod_no_flag() {
  unpack_horovod
  hosts localhost:2
  start -np 2 --min-np 2 "$PYTHON" "$HVD_RESIZE" 40 2
  finish 120
  [ "$rc" -eq 1 ] || fail "horarun exited $rc, expected 1: $(tail -5 err)"
  grep -q "is a program of Horovod's own package: its Gloo asked hora's rendezvous for Horovod's HTTP rendezvous (\"PUT /.*Rerun with --horovod-elastic" err ||
    fail "the end does not name the Horovod worker and the flag: $(tail -5 err)"
  grep -q "Wait timeout" err && fail "a worker's Gloo timed out first: $(grep 'Wait timeout' err)"
  wait_for 10 none_running "$HVD_RESIZE" || fail "workers left: $(pgrep -af "$HVD_RESIZE")"
  ok "a Horovod elastic program without --horovod-elastic ends at its first request: $(grep -o "a worker from .* is a program" err)"
}

# A worker of a real Horovod elastic program is killed (SIGKILL on h2): the survivors on h1 get
# HorovodInternalError, restore their last commit and ask for their place; h2 is blacklisted,
# the barrier releases them into round 1 at size 2, and training goes on from the commit.
case_horovod_kill() {
  unpack_horovod
  up 2
  hosts h1:2 h2:2
  start --horovod-elastic -np 4 --min-np 2 "$PYTHON" "$HVD_RESIZE" 60 2
  wait_for 240 grep -qE "^\[0\]<stdout>:step 10 size 4\$" out ||
    fail "the job did not reach step 10 at size 4: $(tail -5 err; tail -5 out)"
  kill -KILL "$(pids_on h2 python3 | head -1)" || fail "no worker on h2"
  hosts h1:2
  finish 240
  check_done 2
  grep -q "elastic: round 1: .*\bh2\b.*; new size 2 on h1:2" err || fail "no reset line: $(cat err)"
  local r last first
  for r in 0 1; do
    grep -qE "<stdout>:reset rank $r size 2\$" out || fail "rank $r did not reset to size 2: $(grep reset out)"
  done
  # Steps go on from the last commit: the first step at size 2 follows one done at size 4.
  last=$(grep -oE "^\[0\]<stdout>:step [0-9]+ size 4\$" out | tail -1 | awk '{print $2}')
  first=$(grep -oE "^\[0\]<stdout>:step [0-9]+ size 2\$" out | head -1 | awk '{print $2}')
  [ -n "$first" ] && [ "$first" -ge 10 ] && [ "$first" -le $((last + 1)) ] ||
    fail "size 2 began at step '$first', the last step at size 4 was $last"
  wait_for 10 nothing_on h1 h2 || fail "processes left: h1 $(pids_on h1) h2 $(pids_on h2)"
  ok "Horovod elastic: a worker on h2 killed at size 4; survivors reset to size 2 at step $first (last at 4: $last), equal weights, exit 0"
}

"case_$CASE"
