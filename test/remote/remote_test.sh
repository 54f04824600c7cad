#!/bin/bash
# Multi-host tests of horarun over SSH: `remote_test.sh CASE`. Every case brings up its own test
# hosts (scripts/testhosts.sh up --index auto: network namespaces with sshd on port 12345) and
# tears them down on exit, even on failure. Exit 77 (skip) without root or `ip netns`.
# Environment: HORARUN, COLLECTIVES (collectives_check), ALLREDUCE_BENCH (bench/allreduce_bench),
# TESTHOSTS (scripts/testhosts.sh), WORKER (horovod_store_worker), PSET_CHILD
# (runtime_process_set_child), TORCH_CHECK
# (horovod_torch_check.py), HOROVOD_ARCHIVE.
# Every horarun run has a deadline (`timeout`); waits poll a condition with a deadline.
set -u
CASE=${1:?usage: remote_test.sh CASE}

# fail, ok, run, wait_for, gone, check_collectives, need_netns, need_sshd, begin_work, hosts_up
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

need_netns
need_sshd

begin_work remote_test

# up N [OPTIONS...]: N test hosts h1..hN (OPTIONS go to testhosts.sh up, e.g.
# --second-network); sets INDEX, CONFIG (the alias file), STATE (the state dir), NET (the first
# three octets of their network, e.g. 198.18.3).
up() { hosts_up "$TESTHOSTS" "$@"; }

# Processes in the test hosts' namespaces other than their sshd (listeners and session
# processes); prints "namespace pid comm" lines.
rank_processes() {
  local ns pid comm
  for ns in $(ip netns list | awk '{print $1}' | grep "^hora$INDEX-h"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      comm=$(cat /proc/$pid/comm 2>/dev/null) || continue
      [ "$comm" = sshd ] && continue
      echo "$ns $pid $comm"
    done
  done
}
count_sleepers() { [ "$(rank_processes | grep -c " sleep$")" -ge "$1" ]; }
no_rank_processes() { [ -z "$(rank_processes)" ]; }


case_two_hosts() {
  up 2
  run 240 --ssh-config "$CONFIG" -np 4 -H h1:2,h2:2 sh -c 'echo "where $HORA_RANK $HORA_RENDEZVOUS $(ip -o -4 addr show eth0 | awk "{print \$4}")"; exec "$0"' "$COLLECTIVES"
  check_collectives 4
  # Ranks 0,1 run in h1's namespace, 2,3 in h2's, and reach the launcher at its bridge address.
  for r in 0 1; do grep -q "^\[$r\]<stdout>:where $r $NET.1:[0-9]* $NET.11/24$" out || fail "rank $r not on h1"; done
  for r in 2 3; do grep -q "^\[$r\]<stdout>:where $r $NET.1:[0-9]* $NET.12/24$" out || fail "rank $r not on h2"; done
  ok "2 hosts x 2 slots: every collective checked, ranks placed on their hosts"
}

# Process sets across two hosts: {0,2} and {1,3} span them (Gloo contexts of their own),
# A rank stopped on a test host is named within seconds (its host's agent reads /proc and
# sends a STATE frame); the others are spinning in allreduces, not named.
case_stopped_rank_named() {
  up 2
  mkdir -p pids
  "$HORARUN" --ssh-config "$CONFIG" -np 2 -H h1:1,h2:1 --gloo-timeout-seconds 300 \
    "$PROBE" spin "$WORK/pids" >out 2>err &
  local job=$!
  BACKGROUND+=("$job")
  wait_for 60 test -s pids/1.pid || { cat err; fail "rank 1 did not start"; }
  wait_for 30 grep -q "rank 1 ready" out || { cat out err; fail "the ranks are not ready"; }
  local stopped
  stopped=$(cat pids/1.pid)
  kill -STOP "$stopped"
  wait_for 10 grep -q "rank 1 on h2 is state T, stopped (pid $stopped) for" err ||
    { kill -CONT "$stopped"; kill "$job"; cat err; fail "rank 1 on h2 was not named within 10 s of SIGSTOP"; }
  grep -q "rank 0 on h1 is state" err && { kill -CONT "$stopped"; kill "$job"; fail "the running rank was named"; }
  kill -CONT "$stopped"
  kill -INT "$job"
  wait_for 60 gone "$job" || fail "horarun did not end after SIGINT"
  wait_for 30 no_rank_processes || fail "ranks left on the test hosts: $(rank_processes)"
  ok "a rank stopped on a test host is named within seconds, with its pid there"
}

# {0,1} lies on h1 (shared-memory groups of its own inside a two-host job), {0,3}, {3}.
case_process_sets_hosts() {
  up 2
  run 240 --ssh-config "$CONFIG" -np 4 -H h1:2,h2:2 "$PSET_CHILD"
  [ $rc -eq 0 ] || { cat out err; fail "process_set_child exited $rc"; }
  grep -q "PSET_FAIL" out && { cat out; fail "a process set's collective was wrong"; }
  [ "$(grep -c "PSET_OK rank [0-3] sets 5$" out)" -eq 4 ] || { cat out err; fail "expected 4 PSET_OK lines"; }
  ok "process sets across 2 hosts x 2: every collective on 5 sets checked"
}

# exec_channels HOST: how many SSH exec channels (each one a login shell) HOST's sshd started.
exec_channels() { grep -c "Starting session: command" "$STATE/$1/sshd.log"; }

case_one_channel_per_host() {
  up 3
  # Each rank prints its guard's parent's command line: the host's agent, not sshd.
  cat >"$WORK/lineage.sh" <<'SH'
#!/bin/sh
guard_parent=$(awk '{print $4}' /proc/$PPID/stat)
echo "lineage $HORA_RANK $(tr '\0' ' ' </proc/$guard_parent/cmdline)"
SH
  chmod +x "$WORK/lineage.sh"
  # Three hosts x 2 ranks, discovery on (no --network-interfaces): preflight, the listen and
  # connect probes and all six guards, yet one exec channel (one login shell) per host.
  run 240 --ssh-config "$CONFIG" -np 6 -H h1:2,h2:2,h3:2 "$WORK/lineage.sh"
  [ "$rc" -eq 0 ] || fail "the job failed (rc $rc): $(tail -5 err)"
  local h r
  for h in h1 h2 h3; do
    [ "$(exec_channels "$h")" -eq 1 ] ||
      fail "$h: $(exec_channels "$h") SSH exec channels for one job, expected 1"
  done
  for r in 0 1 2 3 4 5; do
    grep -q "^\[$r\]<stdout>:lineage $r .*horarun --agent $" out || fail "rank $r: its guard is not the agent's child: $(grep "lineage $r" out)"
  done
  wait_for 10 no_rank_processes || fail "processes left after the job: $(rank_processes)"
  ok "one SSH exec channel per host for preflight, discovery and 6 ranks; guards are the agent's children"
}

case_three_hosts() {
  up 3
  run 280 --ssh-config "$CONFIG" -np 6 -H h1:2,h2:2,h3:2 "$COLLECTIVES"
  check_collectives 6
  ok "3 hosts x 2 slots: every collective checked"
}

case_user_at_alias() {
  up 2
  run 60 --ssh-config "$CONFIG" -np 2 -H root@h1:1,root@h2:1 sh -c 'echo "$(id -un) $HORA_HOSTNAME"'
  [ $rc -eq 0 ] || fail "root@h1,root@h2: rc=$rc"
  [ "$(sort out)" = "$(printf '[0]<stdout>:root h1\n[1]<stdout>:root h2')" ] || fail "unexpected output"
  # The user of user@host wins over ssh_config's User root. The test sshd authorises the test
  # key for every user, so `nobody` logs in, but its login shell (nologin) cannot run the probe.
  run 60 --ssh-config "$CONFIG" -np 2 -H nobody@h1:1,h2:1 touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "nobody@h1: expected exit 1, got $rc"
  grep -q "nobody@h1" err || fail "the error does not name nobody@h1"
  grep -q "h2" err && fail "h2 (user root from ssh_config) was reported too"
  [ ! -e "$WORK/launched" ] || fail "a rank was started although the preflight failed"
  ok "user@alias: the given user logs in (root runs ranks; nobody's nologin shell is reported by name)"
}

case_config_port() {
  up 1
  # A config of our own: the port comes from this host's block only (no -p, no global Port);
  # without it the connection would go to port 22, where nothing listens.
  cat > cfg <<CFG
Host node-a
  HostName $NET.11
  Port 12345
Host *
  User root
  IdentityFile $STATE/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $STATE/known_hosts
CFG
  run 60 --ssh-config cfg -np 2 -H node-a:2 sh -c 'echo "$HORA_RANK $(ip -o -4 addr show eth0 | awk "{print \$4}")"'
  [ $rc -eq 0 ] || fail "per-host Port from ssh_config: rc=$rc"
  [ "$(sort out)" = "$(printf "[0]<stdout>:0 $NET.11/24\n[1]<stdout>:1 $NET.11/24")" ] || fail "unexpected output"
  ok "the per-host Port of ssh_config is used"
}

case_wrong_port() {
  up 2
  local t0=$SECONDS
  run 60 --ssh-config "$CONFIG" -p 2222 -np 2 -H h1:1,h2:1 touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "wrong -p: expected exit 1, got $rc"
  grep -q "preflight failed on 2 of 2 remote hosts" err || fail "not one message for both hosts"
  grep -q "$NET.11:2222" err && grep -q "$NET.12:2222" err || fail "the error does not name host:port"
  grep -q -- "-p" err || fail "the error does not point at -p"
  [ ! -e "$WORK/launched" ] || fail "a rank was started although the preflight failed"
  [ $((SECONDS - t0)) -le 20 ] || fail "a refused port took $((SECONDS - t0)) s"
  ok "wrong -p: both hosts reported with host:port, nothing launched"
}

case_unauthorised_key() {
  up 2
  ssh-keygen -q -t ed25519 -N '' -f stranger >/dev/null || fail "ssh-keygen"
  sed "s|IdentityFile .*|IdentityFile $WORK/stranger|" "$CONFIG" > cfg
  run 60 --ssh-config cfg -np 2 -H h1:1,h2:1 touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "unauthorised key: expected exit 1, got $rc"
  grep -qi "authentication failed" err || fail "no authentication error"
  grep -q "$WORK/stranger" err || fail "the error does not name the key file tried"
  [ ! -e "$WORK/launched" ] || fail "a rank was started"
  ok "an unauthorised key is refused with the key named, nothing launched"
}

case_changed_host_key() {
  up 2
  ssh-keygen -q -t ed25519 -N '' -f fakehost >/dev/null || fail "ssh-keygen"
  # known_hosts where h1's entry holds another key: the real h1 now looks like an impostor.
  awk -v key="$(cut -d' ' -f1,2 fakehost.pub)" -v h1="[$NET.11]:12345" \
    '$1 == h1 { print h1, key; next } { print }' "$STATE/known_hosts" > known
  grep -q "^\[$NET.11\]:12345 $(cut -d' ' -f1,2 fakehost.pub)" known || fail "could not fake the known_hosts entry"
  sed "s|UserKnownHostsFile .*|UserKnownHostsFile $WORK/known|" "$CONFIG" > cfg
  run 60 --ssh-config cfg -np 2 -H h1:1,h2:1 touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "changed host key: expected exit 1, got $rc"
  grep -qi "changed" err || fail "the error does not say the key changed"
  grep -q "SHA256:" err || fail "no fingerprint in the error"
  grep -q "h2" err && fail "h2 (unchanged key) was reported too"
  [ ! -e "$WORK/launched" ] || fail "a rank was started"
  ok "a changed host key is refused with the fingerprint, only that host reported"
}

# config_with_ghost: ./cfg, the test hosts' alias file plus `ghost`, an address nobody has on
# the test network ($NET.99), with ConnectTimeout 2 to keep the wait short.
config_with_ghost() {
  cat "$CONFIG" > cfg
  cat >> cfg <<CFG

Host ghost
  HostName $NET.99
  Port 12345
  User root
  ConnectTimeout 2
  IdentityFile $STATE/id_ed25519
  UserKnownHostsFile $STATE/known_hosts
CFG
}

case_unreachable() {
  up 1
  config_with_ghost
  local t0=$SECONDS
  # --start-timeout 120 (the preflight's deadline) so that a ConnectTimeout ignored would wait
  # far past the bound below, which is 20 times the 2 s expected.
  run 100 --start-timeout 120 --ssh-config cfg -np 2 -H h1:1,ghost:1 touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "unreachable host: expected exit 1, got $rc"
  grep -q "$NET.99:12345" err || fail "the error does not name the unreachable address"
  grep -q "preflight failed on 1 of 2" err || fail "expected exactly ghost to fail"
  [ ! -e "$WORK/launched" ] || fail "a rank was started on h1 although ghost failed"
  [ $((SECONDS - t0)) -le 40 ] || fail "took $((SECONDS - t0)) s with ConnectTimeout 2"
  ok "an unreachable address fails the preflight within its ConnectTimeout, nothing launched"
}

case_remote_rank_fails() {
  up 2
  run 60 --ssh-config "$CONFIG" -np 4 -H h1:2,h2:2 sh -c 'if [ "$HORA_RANK" = 3 ]; then exit 7; fi; exec sleep 300'
  [ $rc -eq 7 ] || fail "expected rank 3's exit code 7, got $rc"
  grep -q "rank 3 on h2 exited with code 7" err || fail "the cause does not name rank 3 on h2"
  # The other ranks sleep 300 s: exit 7 within run's 60 s deadline proves they were stopped,
  # with no wall-clock bound of our own.
  wait_for 5 no_rank_processes || fail "processes left: $(rank_processes)"
  run 60 --ssh-config "$CONFIG" -np 2 -H h1:1,h2:1 sh -c 'if [ "$HORA_RANK" = 1 ]; then kill -KILL $$; fi; exec sleep 300'
  [ $rc -eq 137 ] || fail "expected 128+9 for a rank killed by SIGKILL, got $rc"
  grep -q "rank 1 on h2 was killed by signal 9" err || fail "the cause does not name the signal"
  ok "a failing remote rank ends the job with its exit code (and its signal)"
}

# start_sleeping_job: horarun in the background with 4 ranks sleeping on h1 and h2, once all 4
# run; sets pid. Not under timeout(1): $pid must be horarun itself. The EXIT trap kills it if a
# check fails.
start_sleeping_job() {
  "$HORARUN" --ssh-config "$CONFIG" -np 4 -H h1:2,h2:2 sleep 300 >out 2>err &
  pid=$!
  BACKGROUND+=("$pid")
  wait_for 30 count_sleepers 4 || fail "the 4 remote ranks did not start: $(rank_processes)"
}

case_sigkill_launcher() {
  up 2
  local pid
  start_sleeping_job
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  wait_for 5 no_rank_processes || fail "left behind 5 s after SIGKILL of horarun: $(rank_processes)"
  ok "SIGKILL of horarun: no process left in any host's namespace after 5 s"
}

count_benches() { [ "$(rank_processes | grep -c " allreduce_bench$")" -ge "$1" ]; }
# Rank processes in the namespaces of the hosts given (e.g. "h1 h3").
processes_on() {
  local h
  for h in "$@"; do rank_processes | grep "^hora$INDEX-$h " ; done
}
none_on() { [ -z "$(processes_on "$@")" ]; }

case_host_lost() {
  up 3
  # h2 drops off the network in the middle of the job (its only interface goes down, so neither
  # the rendezvous nor SSH hears from it again). horarun must end the job with an error naming
  # h2, within its deadlines (rendezvous connection loss, abort and kill graces, then 2 s
  # without an SSH answer), and leave nothing running on the hosts it can still reach.
  "$HORARUN" --ssh-config "$CONFIG" -np 6 -H h1:2,h2:2,h3:2 \
    "$ALLREDUCE_BENCH" --collective allreduce -b 64K -e 64K -n 1000000 --full-iters >out 2>err &
  local pid=$!
  BACKGROUND+=("$pid")
  wait_for 60 count_benches 6 || fail "the 6 ranks did not start: $(rank_processes)"
  sleep 1
  ip netns exec "hora$INDEX-h2" ip link set eth0 down || fail "cannot take h2's eth0 down"
  local t0=$SECONDS
  wait_for 120 gone "$pid" || fail "horarun still running 120 s after h2 was cut off"
  wait "$pid"
  rc=$?
  echo "horarun ended $((SECONDS - t0)) s after h2 was cut off, exit $rc"
  [ $rc -ne 0 ] || fail "horarun exited 0 although h2 was lost"
  # The verdict names the lost host: its agent, or a rank on it.
  grep -qE "^horarun: (the agent on h2 |rank [23] on h2 )" err ||
    fail "the final message does not name h2: $(tail -3 err)"
  wait_for 10 none_on h1 h3 || fail "processes left on h1/h3: $(processes_on h1 h3)"
  ip netns exec "hora$INDEX-h2" ip link set eth0 up
  ok "a host cut off mid-job: the job ends with an error naming it, nothing left on the others"
}

# accepted_from HOST: the addresses HOST's sshd accepted a login from, one per line, sorted.
accepted_from() {
  grep -o "Accepted publickey for root from [0-9.]*" "$STATE/$1/sshd.log" | awk '{print $NF}' | sort
}

# The fan-out tree (--ssh-fanout): horarun connects to the first N hosts only; their agents
# connect to the others and carry their agents' bytes. --ssh-fanout 1 on 4 hosts: h1 relays
# h2..h4; --ssh-fanout 2: h1 relays h3, h2 relays h4.
case_fanout_tree() {
  up 4
  run 240 --ssh-config "$CONFIG" --ssh-fanout 1 -np 4 -H h1,h2,h3,h4 sh -c 'echo "where $HORA_RANK $(ip -o -4 addr show eth0 | awk "{print \$4}")"; exec "$0"' "$COLLECTIVES"
  check_collectives 4
  local r
  for r in 0 1 2 3; do grep -q "^\[$r\]<stdout>:where $r $NET.1$((r + 1))/24$" out || fail "rank $r not on h$((r + 1))"; done
  [ "$(accepted_from h1)" = "$NET.1" ] || fail "h1 logins: $(accepted_from h1 | tr '\n' ' ') (want the launcher's $NET.1 only)"
  for h in h2 h3 h4; do
    [ "$(accepted_from $h)" = "$NET.11" ] || fail "$h logins: $(accepted_from $h | tr '\n' ' ') (want h1's $NET.11 only)"
    [ "$(exec_channels $h)" -eq 1 ] || fail "$h: $(exec_channels $h) exec channels, want 1"
  done
  run 240 --ssh-config "$CONFIG" --ssh-fanout 2 --verbose -np 4 -H h1,h2,h3,h4 "$COLLECTIVES"
  check_collectives 4
  grep -q "h3 ($NET.13:12345) via h1: reaches the launcher at $NET.1" err || fail "h3 not reached via h1"
  grep -q "h4 ($NET.14:12345) via h2: reaches the launcher at $NET.1" err || fail "h4 not reached via h2"
  [ "$(accepted_from h4 | tail -n 1)" = "$NET.12" ] || fail "h4's last login is not from h2"
  ok "--ssh-fanout 1 and 2 on 4 hosts: collectives pass, horarun logs into the first hosts only, the others from them, one exec channel each"
}

case_fanout_tree_failures() {
  up 4
  # A rank on a relayed host fails: its exit code ends the job, naming it; nothing is left.
  run 60 --ssh-config "$CONFIG" --ssh-fanout 1 -np 4 -H h1,h2,h3,h4 sh -c 'if [ "$HORA_RANK" = 3 ]; then exit 7; fi; exec sleep 300'
  [ $rc -eq 7 ] || fail "expected rank 3's exit code 7, got $rc"
  grep -q "rank 3 on h4 exited with code 7" err || fail "the cause does not name rank 3 on h4"
  wait_for 5 no_rank_processes || fail "processes left: $(rank_processes)"
  # A relayed host that does not answer: the preflight names it and where it was tried from.
  config_with_ghost
  run 100 --start-timeout 60 --ssh-config cfg --ssh-fanout 1 -np 3 -H h1,h2,ghost touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "unreachable relayed host: expected exit 1, got $rc"
  grep -q "preflight failed on 1 of 3" err || fail "expected exactly ghost to fail"
  grep -q "$NET.99:12345.*made from h1" err || fail "the error does not name ghost's address and h1"
  [ ! -e "$WORK/launched" ] || fail "a rank was started although ghost failed"
  # The relaying host itself fails: its hosts are reported as not tried, with the way out.
  run 60 --ssh-config "$CONFIG" --ssh-fanout 1 -p 2222 -np 3 -H h1,h2,h3 true
  [ $rc -eq 1 ] || fail "wrong port: expected exit 1, got $rc"
  grep -q "$NET.11:2222" err || fail "h1's failure does not name host:port"
  grep -q "h3 ($NET.13:2222): not tried: it is reached through h1, which failed (--ssh-fanout 0" err || fail "h3 not reported as not tried"
  ok "relayed hosts: a failing rank ends the job naming it; an unreachable relayed host and a failed relaying host are reported, nothing launched"
}

case_fanout_tree_lost() {
  up 4
  local pid p
  # SIGKILL of horarun: the relaying agent's channel ends, it drops its connections, and every
  # relayed agent stops its ranks.
  "$HORARUN" --ssh-config "$CONFIG" --ssh-fanout 1 -np 4 -H h1,h2,h3,h4 sleep 300 >out 2>err &
  pid=$!
  BACKGROUND+=("$pid")
  wait_for 30 count_sleepers 4 || fail "the 4 ranks did not start: $(rank_processes)"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  wait_for 5 no_rank_processes || fail "left behind 5 s after SIGKILL of horarun: $(rank_processes)"
  # The relaying agent SIGKILLed: the job ends with an error naming h1's agent first, and its
  # relayed hosts' ranks stop (their connections died with it).
  "$HORARUN" --ssh-config "$CONFIG" --ssh-fanout 1 -np 4 -H h1,h2,h3,h4 sleep 300 >out 2>err &
  pid=$!
  BACKGROUND+=("$pid")
  wait_for 30 count_sleepers 4 || fail "the 4 ranks did not start: $(rank_processes)"
  p=$(for q in $(ip netns pids "hora$INDEX-h1"); do tr '\0' ' ' < /proc/$q/cmdline 2>/dev/null | grep -q -- "--agent" && echo "$q"; done | head -n 1)
  [ -n "$p" ] || fail "no agent process in h1's namespace"
  kill -KILL "$p"
  wait_for 60 gone "$pid" || fail "horarun still running 60 s after h1's agent was killed"
  wait "$pid"
  rc=$?
  [ $rc -ne 0 ] || fail "horarun exited 0 although h1's agent was killed"
  grep -m1 "^horarun: error:" err | grep -q "the agent on h1 ($NET.11:12345) ended (killed by signal KILL)" || fail "the first error does not name h1's agent"
  grep -q "rank 3 on h4: the agent on h4 ($NET.14:12345) via h1 ended" err || fail "h4's loss is not explained by h1"
  wait_for 10 no_rank_processes || fail "processes left: $(rank_processes)"
  ok "relayed hosts: SIGKILL of horarun or of the relaying agent leaves no process on any host"
}

# The agent process in host $1's namespace (docs/agent.md).
agent_pid_on() {
  for q in $(ip netns pids "hora$INDEX-$1"); do tr '\0' ' ' < /proc/$q/cmdline 2>/dev/null | grep -q -- "--agent" && echo "$q"; done | head -n 1
}

# Starts a 4-rank job (args: extra horarun flags) whose ranks sleep, or write output with
# WRITERS=1, and waits for its ranks. Sets pid.
start_agent_job() {
  if [ "${WRITERS:-0}" = 1 ]; then
    "$HORARUN" --ssh-config "$CONFIG" "$@" -np 4 -H h1,h2,h3,h4 sh -c 'while :; do echo "line from $HORA_RANK"; done & exec sleep 300' >out 2>err &
  else
    "$HORARUN" --ssh-config "$CONFIG" "$@" -np 4 -H h1,h2,h3,h4 sleep 300 >out 2>err &
  fi
  pid=$!
  BACKGROUND+=("$pid")
  wait_for 60 count_sleepers 4 || fail "the 4 ranks did not start: $(rank_processes)"
}

# Signals host $1's agent with $2 and checks that the job ends within $3 s with 255 and a
# verdict line matching $4.
agent_signal_case() {
  local host=$1 sig=$2 within=$3 words=$4 p
  p=$(agent_pid_on "$host")
  [ -n "$p" ] || fail "no agent process in $host's namespace"
  local t0; t0=$(date +%s.%N)
  kill "-$sig" "$p"
  wait_for "$within" gone "$pid" || fail "horarun still running $within s after SIG$sig to $host's agent"
  # Reported, not asserted: the time from the signal to horarun's end.
  echo "SIG$sig to $host's agent: horarun ended after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  echo "verdict: $(tail -n 1 err)"
  wait "$pid"
  rc=$?
  [ $rc -eq 255 ] || fail "exit $rc after SIG$sig to $host's agent, not 255: $(tail -n 3 err)"
  tail -n 1 err | grep -q "$words" || fail "the verdict does not name $host's agent: $(tail -n 1 err)"
  wait_for 15 no_rank_processes || fail "processes left after SIG$sig to $host's agent: $(rank_processes)"
}

case_agent_term_direct() {
  up 4
  start_agent_job
  agent_signal_case h2 TERM 30 "^horarun: the agent on h2 ($NET.12:12345) was terminated by signal 15 (SIGTERM); rank 1 on h2"
  ok "SIGTERM to a direct agent: the verdict names the agent, exit 255"
}

case_agent_relay_term() {
  up 4
  start_agent_job --ssh-fanout 1
  agent_signal_case h1 TERM 30 "^horarun: the agent on h1 ($NET.11:12345) was terminated by signal 15 (SIGTERM) (it relayed h2"
  ok "SIGTERM to the relaying agent (--ssh-fanout 1): the verdict names h1 and the hosts behind it"
}

case_agent_relay_kill() {
  up 4
  start_agent_job --ssh-fanout 1
  agent_signal_case h1 KILL 30 "^horarun: the agent on h1 ($NET.11:12345) ended (killed by signal KILL) (it relayed h2"
  ok "SIGKILL of the relaying agent (--ssh-fanout 1): the verdict names h1"
}

case_agent_stop_direct() {
  up 4
  export HORA_AGENT_TIMEOUT_SECONDS=5
  WRITERS=1 start_agent_job
  agent_signal_case h3 STOP 40 "^horarun: the agent on h3 ($NET.13:12345) (pid [0-9]*) stopped answering"
  ok "a SIGSTOPped direct agent ends the job within the bound, named, nothing left"
}

case_agent_stop_relay() {
  up 4
  export HORA_AGENT_TIMEOUT_SECONDS=5
  WRITERS=1 start_agent_job --ssh-fanout 1
  agent_signal_case h1 STOP 40 "^horarun: the agent on h1 ($NET.11:12345) (pid [0-9]*) stopped answering"
  ok "a SIGSTOPped relaying agent ends the job within the bound, named, nothing left"
}

# The agent of a host reached through h1 (--ssh-fanout 1) is stopped while h1's agent keeps
# answering: the verdict names that host via h1, and h1's agent kills it (RELAY_KILL).
case_agent_stop_leaf() {
  up 4
  export HORA_AGENT_TIMEOUT_SECONDS=5
  WRITERS=1 start_agent_job --ssh-fanout 1
  agent_signal_case h3 STOP 60 "^horarun: the agent on h3 ($NET.13:12345) via h1 (pid [0-9]*) stopped answering"
  if grep -q "could not kill the silent agent" err; then
    fail "the stopped relayed agent was not killed: $(grep "could not kill" err)"
  fi
  ok "a SIGSTOPped relayed agent whose relaying agent answers is named and killed, nothing left"
}

# Every rank prints as fast as it can (`yes`) when h3's agent is stopped: the launcher's loop,
# busy with output, still runs the watchdog, and the verdict names h3's agent first. The times
# are printed, not asserted (docs/agent.md, "Liveness").
case_agent_stop_flooding() {
  up 4
  export HORA_AGENT_TIMEOUT_SECONDS=5
  "$HORARUN" --ssh-config "$CONFIG" -np 4 -H h1,h2,h3,h4 sh -c 'yes "line from $HORA_RANK" & exec sleep 300' >out 2>err &
  pid=$!
  BACKGROUND+=("$pid")
  wait_for 60 count_sleepers 4 || fail "the 4 ranks did not start: $(rank_processes)"
  wait_for 60 grep -q "^\[3\]<stdout>:line from 3" out || fail "rank 3's output does not arrive"
  local p t0 words="the agent on h3 ($NET.13:12345) (pid [0-9]*) stopped answering: nothing came from it for [0-9.]* m\?s"
  p=$(agent_pid_on h3)
  [ -n "$p" ] || fail "no agent process in h3's namespace"
  t0=$(date +%s.%N)
  kill -STOP "$p"
  wait_for 120 grep -q "^horarun: error: rank 2 on h3: $words" err ||
    fail "no verdict on h3's stopped agent 120 s after SIGSTOP under output: $(grep -v '^\[' err | tail -n 3)"
  echo "SIGSTOP to h3's agent under output: the watchdog's verdict after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s: $(grep -o 'nothing came from it for [^(]*' err | head -n 1)"
  wait_for 60 gone "$pid" || fail "horarun still running 60 s after its verdict on h3's agent"
  echo "horarun ended after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  wait "$pid"
  rc=$?
  [ $rc -eq 255 ] || fail "exit $rc after SIGSTOP to h3's agent, not 255: $(tail -n 3 err)"
  # Nothing else was blamed first: the first error is the verdict on h3, and the last line too.
  grep -m 1 "^horarun: error:" err | grep -q "^horarun: error: rank 2 on h3: $words" ||
    fail "the first error is not the verdict on h3's agent: $(grep -m 1 '^horarun: error:' err)"
  tail -n 1 err | grep -q "^horarun: $words" || fail "the verdict does not name h3's agent: $(tail -n 1 err)"
  wait_for 15 no_rank_processes || fail "processes left after SIGSTOP to h3's agent: $(rank_processes)"
  ok "a SIGSTOPped agent under a flood of output is named by the watchdog, nothing left"
}

case_secret_not_on_command_line() {
  up 2
  local pid
  start_sleeping_job
  local p secret="" n=0
  p=$(rank_processes | awk '$3 == "sleep" {print $2; exit}')
  secret=$(tr '\0' '\n' < /proc/$p/environ | sed -n 's/^HORA_SECRET=//p')
  [ ${#secret} -eq 64 ] || fail "rank process $p has no 64-digit HORA_SECRET"
  for f in /proc/[0-9]*/cmdline; do
    [ -r "$f" ] || continue
    n=$((n + 1))
    tr '\0' ' ' < "$f" 2>/dev/null | grep -q "$secret" && fail "the secret is on the command line of ${f%/cmdline}: $(tr '\0' ' ' < "$f")"
  done
  [ "$n" -gt 10 ] || fail "read only $n command lines"
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null
  wait_for 10 no_rank_processes || fail "processes left after SIGTERM: $(rank_processes)"
  ok "the job secret is on no process's command line ($n checked)"
}

case_mixed_local_remote() {
  up 2
  # Rank 0 on this machine, 1 and 2 in namespaces. Discovery runs with this machine taking part
  # in-process: its only interface the namespaces reach is the bridge (hora<K>br0, $NET.1), so
  # the local rank binds that, the rendezvous server listens there (not on 0.0.0.0), and
  # MASTER_ADDR is that address (rank 0 is local).
  run 240 --verbose --ssh-config "$CONFIG" -np 3 -H localhost:1,h1:1,h2:1 sh -c 'echo "net $HORA_RANK $HORA_IFACE $NCCL_SOCKET_IFNAME $MASTER_ADDR $HORA_RENDEZVOUS"; exec "$0"' "$COLLECTIVES"
  check_collectives 3
  grep -q "^network: interfaces discovered" out || fail "no discovery for a mixed job"
  grep -qE "^  localhost: hora${INDEX}br0 $NET\.1( |$)" out || fail "this machine's choice is not its bridge"
  grep -q "rendezvous server listening on $NET.1:" err || fail "the rendezvous server does not listen on the chosen address: $(grep -o 'listening on [^ ]*' err)"
  grep -q "^\[0\]<stdout>:net 0 hora${INDEX}br0 hora${INDEX}br0 $NET.1 $NET.1:[0-9]*$" out || fail "rank 0's network variables"
  for r in 1 2; do
    grep -q "^\[$r\]<stdout>:net $r eth0 eth0 $NET.1 $NET.1:[0-9]*$" out || fail "rank $r's network variables"
  done
  ok "local and remote ranks in one job: discovery includes this machine; every collective checked"
}

case_single_remote_host() {
  up 1
  # One remote host, no other host to probe: its interface is the one SSH reached it on.
  run 120 --verbose --ssh-config "$CONFIG" -np 2 -H h1:2 sh -c 'echo "net $HORA_RANK $HORA_IFACE $MASTER_ADDR"; exec "$0"' "$COLLECTIVES"
  check_collectives 2
  grep -q "^  h1: eth0 $NET.11$" out || fail "h1's choice was not printed as eth0"
  for r in 0 1; do grep -q "^\[$r\]<stdout>:net $r eth0 $NET.11$" out || fail "rank $r's network variables"; done
  grep -q "rendezvous server listening on $NET.1:" err || fail "the rendezvous server does not listen on the address h1 reaches"
  # With horarun's stdout closed (`>&-`), its first socket must not become descriptor 1 (rank
  # output would be written into the SSH connection).
  timeout -s KILL 60 "$HORARUN" --ssh-config "$CONFIG" -np 2 -H h1:2 sh -c 'echo out; echo err >&2' >&- 2>err
  rc=$?
  [ $rc -eq 0 ] || fail "exit $rc with stdout closed"
  [ "$(grep -c '^\[[01]\]<stderr>:err$' err)" -eq 2 ] || fail "the remote ranks' stderr lines are missing"
  ok "a single remote host: eth0 chosen, MASTER_ADDR is its address; stdout closed works"
}

case_network_interfaces() {
  up 2
  run 60 --ssh-config "$CONFIG" --network-interfaces eth0 -np 2 -H h1:1,h2:1 sh -c 'echo "$HORA_IFACE $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"'
  [ $rc -eq 0 ] || fail "--network-interfaces eth0: rc=$rc"
  [ "$(sort out)" = "$(printf '[0]<stdout>:eth0 eth0 eth0\n[1]<stdout>:eth0 eth0 eth0')" ] || fail "unexpected interface variables"
  run 60 --ssh-config "$CONFIG" --network-interfaces eth9 -np 2 -H h1:1,h2:1 touch "$WORK/launched"
  [ $rc -eq 2 ] || fail "--network-interfaces eth9: expected exit 2, got $rc"
  grep -q "no interface eth9 on h1; it has lo, eth0" err && grep -q "no interface eth9 on h2" err ||
    fail "the error does not list both hosts' interfaces"
  [ ! -e "$WORK/launched" ] || fail "a rank was started"
  # A typo of the common name: one global suggestion. Loopback cannot join hosts. A host that is
  # not in the job is refused before any connection.
  run 60 --ssh-config "$CONFIG" --network-interfaces eht0 -np 2 -H h1:1,h2:1 true
  [ $rc -eq 2 ] && grep -q "^all together: --network-interfaces eth0$" err || fail "no global suggestion for a typo (rc=$rc)"
  run 60 --ssh-config "$CONFIG" --network-interfaces lo -np 2 -H h1:1,h2:1 true
  [ $rc -eq 2 ] && grep -q "lo on h1 is a loopback interface" err || fail "loopback accepted across hosts (rc=$rc)"
  run 60 --ssh-config "$CONFIG" --network-interfaces h9=eth0 -np 2 -H h1:1,h2:1 true
  [ $rc -eq 2 ] && grep -q "h9 is not a host of this job (hosts: h1, h2)" err || fail "unknown host in the spec (rc=$rc)"
  ok "--network-interfaces is checked against every remote host's probe and passed to its ranks"
}

case_discovery() {
  # h1..h3 share eth0; the second network is not common: h1 eth1 and h2 ens5 reach each other
  # but h3's eth1 is isolated. Discovery must keep only eth0 on every host.
  up 2 --second-network
  run 120 --verbose --ssh-config "$CONFIG" -np 3 -H h1:1,h2:1,h3:1 sh -c 'echo "iface $HORA_RANK $HORA_IFACE $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"; exec "$0"' "$COLLECTIVES"
  check_collectives 3
  grep -q "^network: interfaces discovered" out || fail "--verbose did not print the discovered choice"
  for h in h1 h2 h3; do
    grep -qE "^  $h: eth0 $NET\.[0-9]+" out || fail "discovery did not choose eth0 on $h"
  done
  for r in 0 1 2; do
    grep -q "^\[$r\]<stdout>:iface $r eth0 eth0 eth0$" out || fail "rank $r did not get eth0"
  done
  local ms
  ms=$(sed -n 's/.*network discovery on 3 hosts took \([0-9]*\) ms.*/\1/p' err)
  [ -n "$ms" ] || fail "no discovery timing in the --verbose log"
  # No bound on $ms here: a loaded machine may take any time the job's deadlines allow, and the
  # job above succeeding proves discovery finished within them. The speed figure is
  # bench/discovery.sh's.
  grep -q "^network: reachability measured by the probes:" out || fail "--verbose did not print the reachability table"
  ok "discovery on 3 hosts picks the common routable eth0 (not the partly isolated second network) in $ms ms"
}

case_dry_run() {
  up 2 --second-network
  # --dry-run preflights and discovers, prints the choice per host, and starts nothing.
  run 60 --dry-run --ssh-config "$CONFIG" -np 3 -H h1:1,h2:1,h3:1 touch "$WORK/launched"
  [ $rc -eq 0 ] || fail "--dry-run exited $rc"
  grep -q "^host h1: 1 rank, over SSH to" out || fail "no host lines"
  grep -q "^network: interfaces discovered" out || fail "--dry-run did not print the discovered choice"
  for h in h1 h2 h3; do grep -qE "^  $h: eth0 $NET\.[0-9]+" out || fail "no choice for $h"; done
  wait_for 5 no_rank_processes || fail "processes left after --dry-run: $(rank_processes)"
  [ ! -e "$WORK/launched" ] || fail "--dry-run started a rank"
  # The named per-host interfaces are checked against every host (h2's is ens5), too.
  run 60 --dry-run --ssh-config "$CONFIG" --network-interfaces eth1,h2=ens5 -np 2 -H h1:1,h2:1 true
  [ $rc -eq 0 ] || fail "--dry-run --network-interfaces eth1,h2=ens5 exited $rc"
  grep -q "^network: interfaces from --network-interfaces:" out && grep -qE "^  h1: eth1 198\.19\.$INDEX\.11$" out &&
    grep -qE "^  h2: ens5 198\.19\.$INDEX\.12$" out || fail "--dry-run did not print the named interfaces"
  ok "--dry-run prints the discovered and the named interfaces per host and starts nothing"
}

case_discovery_unreachable() {
  up 2 --second-network
  # h1 can no longer reach h3's eth0 (and h3's replies to h1 are lost the same way); h3's second
  # interface is isolated anyway. No interface of h1 or h3 is reachable from every other host:
  # the launch must fail before any rank starts, with the measured table.
  # Named interfaces are measured too: h3's eth1 is isolated, so naming eth1 fails before any
  # rank starts, with the table and the spec that works.
  run 60 --ssh-config "$CONFIG" --network-interfaces eth1 -np 2 -H h1:1,h3:1 touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "--network-interfaces eth1 with h3's eth1 isolated: expected exit 1, got $rc"
  grep -q "eth1 on h3 (198.19.$INDEX.13) is not reachable over TCP from h1" err || fail "the error does not name h3's eth1"
  grep -q "e.g. --network-interfaces eth0)" err || fail "the error does not suggest eth0"
  [ ! -e "$WORK/launched" ] || fail "a rank was started"
  ip netns exec "hora$INDEX-h1" ip route add unreachable "$NET.13/32" || fail "cannot add the route"
  run 60 --ssh-config "$CONFIG" -np 3 -H h1:1,h2:1,h3:1 touch "$WORK/launched"
  [ $rc -eq 1 ] || fail "expected exit 1, got $rc"
  grep -q "no network interface of h1, h3 is reachable over TCP from every other host" err ||
    fail "the error does not name h1 and h3"
  grep -qE "^ +host +interface +address +from h1 +from h2 +from h3$" err || fail "no reachability table header"
  grep -qE "^ +h3 +eth0 +$NET\.13 +no +yes +-$" err || fail "the table does not show h3's eth0 unreachable from h1 only"
  grep -q "network-interfaces" err || fail "the error does not name the flag that fixes it"
  [ ! -e "$WORK/launched" ] || fail "a rank was started"
  wait_for 5 no_rank_processes || fail "processes left: $(rank_processes)"
  ok "no routable set: exit 1 with the reachability table, nothing started"
}

# tx/rx bytes of interface IF in host HOST's namespace: "tx rx".
counters() {
  local ns="hora$INDEX-$1" dir="/sys/class/net/$2/statistics"
  echo "$(ip netns exec "$ns" cat "$dir/tx_bytes") $(ip netns exec "$ns" cat "$dir/rx_bytes")"
}

case_interface_traffic() {
  up 2 --second-network
  # h1's data interface is eth1, h2's is ens5 (same network, another name). Name them per host
  # and check, by the interfaces' byte counters, that the collectives' traffic went there and
  # not over eth0 (which carries SSH and the rendezvous).
  local before after
  declare -A before after
  for hi in h1:eth0 h1:eth1 h2:eth0 h2:ens5; do before[$hi]=$(counters "${hi%:*}" "${hi#*:}"); done
  run 180 --ssh-config "$CONFIG" --network-interfaces eth1,h2=ens5 -np 2 -H h1:1,h2:1 \
    sh -c 'echo "net $HORA_RANK $HORA_IFACE $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"; exec "$0" "$@"' \
    "$ALLREDUCE_BENCH" --collective allreduce -b 1M -e 1M -n 40 -w 5 --full-iters
  [ $rc -eq 0 ] || fail "allreduce_bench exited $rc"
  grep -q "^\[0\]<stdout>:net 0 eth1 eth1 eth1$" out || fail "rank 0 (h1) did not get eth1"
  grep -q "^\[1\]<stdout>:net 1 ens5 ens5 ens5$" out || fail "rank 1 (h2) did not get ens5"
  grep -qE "^\[0\]<stdout>: +1048576 +262144 +float32 +sum" out || fail "no 1 MiB row from allreduce_bench"
  grep -qE "Out of bounds values : 0 OK" out || fail "allreduce_bench found wrong values"
  for hi in h1:eth0 h1:eth1 h2:eth0 h2:ens5; do after[$hi]=$(counters "${hi%:*}" "${hi#*:}"); done
  delta() { local b=(${before[$1]}) a=(${after[$1]}); echo $(( (a[0] - b[0]) + (a[1] - b[1]) )); }
  echo "bytes (tx+rx): h1 eth0 $(delta h1:eth0), h1 eth1 $(delta h1:eth1), h2 eth0 $(delta h2:eth0), h2 ens5 $(delta h2:ens5)"
  # 90 allreduces of 1 MiB (45 out of place, 45 in place) between 2 ranks move about 90 MiB each
  # way; at least 40 MiB counted in both directions is a wide margin. eth0 only carries
  # SSH, the rendezvous and the printed lines.
  local data=$((40 * 1024 * 1024))
  [ "$(delta h1:eth1)" -gt $data ] || fail "h1's eth1 carried only $(delta h1:eth1) bytes"
  [ "$(delta h2:ens5)" -gt $data ] || fail "h2's ens5 carried only $(delta h2:ens5) bytes"
  [ "$(delta h1:eth0)" -lt $((data / 10)) ] || fail "h1's eth0 carried $(delta h1:eth0) bytes: collectives went there"
  [ "$(delta h2:eth0)" -lt $((data / 10)) ] || fail "h2's eth0 carried $(delta h2:eth0) bytes: collectives went there"
  ok "--network-interfaces eth1,h2=ens5: the collectives' bytes went over eth1 and ens5, not eth0"
}

case_horovod_store_hosts() {
  up 2
  # Horovod's HTTP store protocol across two hosts, then mixed with a rank on this machine (whose
  # scope is local_localhost) and with the three refusals sent by rank 0.
  run 120 --ssh-config "$CONFIG" -np 4 -H h1:2,h2:2 "$WORKER"
  [ $rc -eq 0 ] || fail "rc=$rc"
  [ "$(grep -c 'horovod-store ok' out)" -eq 4 ] || fail "not every rank finished"
  grep -q "^\[2\]<stdout>:horovod-store ok rank=2 size=4 host=h2$" out || fail "rank 2 not on h2"
  run 120 --verbose --ssh-config "$CONFIG" -np 3 -H localhost:1,h1:1,h2:1 "$WORKER" rejections
  [ $rc -eq 0 ] || fail "mixed job rc=$rc"
  [ "$(grep -c 'horovod-store ok' out)" -eq 3 ] && grep -q 'horovod-store rejections ok' out ||
    fail "mixed job: not every rank finished"
  grep -q "Horovod rendezvous (HTTP) listening on $NET.1:" err ||
    fail "Horovod's rendezvous does not listen on the job's address only"
  ok "Horovod's HTTP store across hosts and in a mixed local + remote job"
}

# http_status NAMESPACE METHOD URL: the HTTP status of a request from that test host, 000 when
# the server closed the connection without an answer.
http_status() {
  local data=()
  [ "$2" = PUT ] && data=(--data x)
  ip netns exec "$1" curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X "$2" "${data[@]}" "$3"
}

# start_kv_job HOSTS: a job on HOSTS (-H) whose ranks sleep, in the background; sets KV to its
# Horovod key-value server's ADDR:PORT (rank 0's HOROVOD_GLOO_RENDEZVOUS_*).
start_kv_job() {
  "$HORARUN" --ssh-config "$CONFIG" -np 2 -H "$1" bash -c \
    'echo "kv=$HOROVOD_GLOO_RENDEZVOUS_ADDR:$HOROVOD_GLOO_RENDEZVOUS_PORT"; sleep 30' >out 2>err &
  BACKGROUND+=($!)
  wait_for 60 grep -q "^\[0\]<stdout>:kv=" out || fail "the ranks did not start: $(cat err)"
  KV=$(sed -n 's/^\[0\]<stdout>:kv=//p' out | head -1)
}

case_horovod_stranger_host() {
  up 3
  # Horovod's key-value server runs for every job; h3 is a test host outside this job.
  start_kv_job h1:1,h2:1
  local kv=$KV
  local from_job from_stranger
  # A key nobody stored: the server answers the job's host (404), and closes on the stranger.
  from_job=$(http_status "hora$INDEX-h1" GET "http://$kv/global/nobody")
  from_stranger=$(http_status "hora$INDEX-h3" PUT "http://$kv/global/rank_0")
  [ "$from_job" = 404 ] || fail "a GET from the job's host h1 got HTTP $from_job, want 404"
  [ "$from_stranger" = 000 ] || fail "a PUT from h3, outside the job, got HTTP $from_stranger"
  wait_for 10 grep -q "refused a request from $NET.13:[0-9]*: $NET.13 is not the address of one of the job's hosts" err ||
    fail "the refusal does not name h3's address: $(grep -i refused err)"
  kill -TERM "${BACKGROUND[-1]}"
  ok "Horovod's key-value server answers the job's hosts and refuses another host ($NET.13)"
}

case_horovod_reserved_slots() {
  up 1
  # A job with a rank here and one on h1: the key-value server allows 4 x 2 + 64 = 72
  # connections, 2 per rank (4) kept for this machine's ranks. h1, a job host, opens 72 idle
  # connections and holds them: 68 are accepted, the rest refused; a request from this machine
  # is still answered.
  start_kv_job localhost:1,h1:1
  local kv=$KV
  ip netns exec "hora$INDEX-h1" /usr/bin/python3 -c '
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
held = []
for _ in range(72):
    s = socket.create_connection((host, int(port)), timeout=10)
    held.append(s)
print("holding", len(held), flush=True)
time.sleep(15)
' "$kv" >holder.out 2>&1 &
  BACKGROUND+=($!)
  wait_for 30 grep -q "^holding 72" holder.out || fail "h1 could not open its connections: $(cat holder.out)"
  wait_for 10 grep -q "more than 72 open connections (4 kept for this machine's ranks)" err ||
    fail "no refusal for h1's connections past the limit: $(grep -i refused err | head -3)"
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://$kv/global/nobody")
  [ "$code" = 404 ] || fail "a request from this machine got HTTP $code while h1 held the rest, want 404"
  kill -TERM "${BACKGROUND[@]}" 2>/dev/null
  ok "Horovod's key-value server keeps 4 connections for this machine's ranks while a host holds the rest"
}

case_horovod_torch_hosts() {
  unpack_horovod
  up 2
  local np
  for np in 2 4; do
    run 300 --ssh-config "$CONFIG" -np "$np" -H "h1:$((np / 2)),h2:$((np / 2))" -x PYTHONPATH "$PYTHON" "$TORCH_CHECK"
    [ $rc -eq 0 ] || fail "-np $np rc=$rc"
    [ "$(grep -c 'horovod-torch ok' out)" -eq "$np" ] || fail "not every rank passed at -np $np"
  done
  # Horovod 0.28's process-set contexts (created at hvd.init()) ignore HOROVOD_GLOO_IFACE and bind
  # the address the host's name resolves to (docs/rendezvous.md). A rank on this machine can
  # only join when that address is not loopback.
  if getent ahostsv4 "$(hostname)" | awk '{print $1}' | grep -qv '^127\.'; then
    run 300 --ssh-config "$CONFIG" -np 2 -H localhost:1,h1:1 -x PYTHONPATH "$PYTHON" "$TORCH_CHECK"
    [ $rc -eq 0 ] || fail "mixed rc=$rc"
    [ "$(grep -c 'horovod-torch ok' out)" -eq 2 ] || fail "not every rank passed in the mixed job"
    ok "a real Horovod PyTorch program across two hosts (-np 2, 4) and mixed local + remote"
  else
    ok "a real Horovod PyTorch program across two hosts (-np 2, 4); mixed local + remote not run: $(hostname) resolves to loopback here"
  fi
}

case_env_forwarding() {
  up 1
  unset OMP_NUM_THREADS
  # A variable set only in the launcher's environment reaches the remote rank; denylisted ones
  # (DISPLAY, *CUDA_VISIBLE_DEVICES) do not; -x still overrides; --no-env-forwarding stops it.
  HORA_ONLY_HERE='a b;$c' DISPLAY=:77 CUDA_VISIBLE_DEVICES=3 PYTHONPATH=/launcher/py \
    run 60 --ssh-config "$CONFIG" -np 2 -H h1:2 -x PYTHONPATH=/from/x sh -c 'env | sort'
  [ $rc -eq 0 ] || fail "rc=$rc"
  grep -qx '\[1\]<stdout>:HORA_ONLY_HERE=a b;$c' out || fail "the launcher's variable did not reach the remote rank"
  grep -qx '\[1\]<stdout>:PYTHONPATH=/from/x' out || fail "-x did not win over the forwarded value"
  ! grep -q '<stdout>:DISPLAY=:77$' out || fail "DISPLAY (denylisted) was forwarded"
  ! grep -q '<stdout>:CUDA_VISIBLE_DEVICES=3$' out || fail "CUDA_VISIBLE_DEVICES (denylisted) was forwarded"
  grep -qx '\[0\]<stdout>:OMP_NUM_THREADS=1' out || fail "two ranks on h1 without OMP_NUM_THREADS=1"
  grep -q "setting OMP_NUM_THREADS=1" err || fail "OMP_NUM_THREADS=1 was not announced"
  HORA_ONLY_HERE=x run 60 --no-env-forwarding --ssh-config "$CONFIG" -np 1 -H h1:1 sh -c 'env | sort'
  [ $rc -eq 0 ] || fail "--no-env-forwarding rc=$rc"
  ! grep -q 'HORA_ONLY_HERE' out || fail "--no-env-forwarding still forwarded the launcher's variable"
  ok "the launcher's environment reaches remote ranks minus the denylist; -x wins; --no-env-forwarding"
}

case_missing_program() {
  up 2
  # A program that resolves on no remote host: one preflight error naming each host and the PATH
  # searched, exit 1, and no rank started (not exit 127 from every rank).
  PATH="/nowhere:$PATH" run 60 --ssh-config "$CONFIG" -np 2 -H h1:1,h2:1 no-such-program-xyz
  [ $rc -eq 1 ] || fail "rc=$rc"
  grep -q "preflight failed on 2 of 2 remote hosts; nothing was started" err || fail "no preflight error"
  for h in h1 h2; do
    grep -q "@$h ([0-9.:]*): 'no-such-program-xyz' is not found there in PATH=/nowhere:" err ||
      fail "$h and its PATH are not named"
  done
  ! grep -q "started rank\|<stderr>" err || fail "a rank was started"
  # A path that exists on every host passes the check.
  run 60 --ssh-config "$CONFIG" -np 2 -H h1:1,h2:1 /bin/true
  [ $rc -eq 0 ] || fail "/bin/true rc=$rc"
  ok "a program missing on the remote hosts is one preflight error naming each host and its PATH"
}

"case_${CASE//-/_}"
