#!/bin/bash
# Elastic jobs on real test hosts (docs/elastic.md): `elastic_test.sh CASE`. Every case brings up
# its own network-namespace hosts with sshd (scripts/testhosts.sh up --index auto) and tears them
# down on exit, even on failure. Exit 77 (skip) without root or `ip netns`.
# Environment: HORARUN, ELASTIC_TRAIN (examples/elastic_train), TESTHOSTS (scripts/testhosts.sh),
# PYTHONPATH (build/python for hora.torch), PY_ELASTIC (the elastic PyTorch example).
# The hosts the job may use are a file the discovery script prints; a case edits it to make a
# host come or go. Every horarun run has a deadline; waits poll a condition with a deadline.
set -u
CASE=${1:?usage: elastic_test.sh CASE}

[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (network namespaces)"; exit 77; }
ip netns list >/dev/null 2>&1 || { echo "skip: ip netns is unavailable"; exit 77; }
command -v /usr/sbin/sshd >/dev/null || { echo "skip: no sshd"; exit 77; }

WORK=$(mktemp -d /tmp/elastic_test.XXXXXX)
INDEX=""
PID=""
cleanup() {
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
  [ -n "$INDEX" ] && "$TESTHOSTS" down --index "$INDEX" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"

# fail, ok, wait_for, gone
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

up() {
  local vars
  vars=$("$TESTHOSTS" up --index auto --hosts "$1" 2>"$WORK/testhosts.log") ||
    { cat "$WORK/testhosts.log" >&2; fail "testhosts.sh up failed"; }
  eval "$vars"
  INDEX=$HORA_TESTHOSTS_INDEX
  CONFIG=$HORA_TESTHOSTS_SSH_CONFIG
  unset HORA_TESTHOSTS_INDEX HORA_TESTHOSTS_DIR HORA_TESTHOSTS_SSH_CONFIG
}

# hosts LINE...: what the discovery script prints from now on.
hosts() { printf '%s\n' "$@" >"$WORK/hosts.new" && mv "$WORK/hosts.new" "$WORK/hosts"; }
printf '#!/bin/sh\ncat %s/hosts\n' "$WORK" >"$WORK/discover.sh"
chmod +x "$WORK/discover.sh"

# start ARGS...: horarun in the background (output in ./out and ./err), with the test hosts'
# ssh_config and the discovery script.
start() {
  "$HORARUN" --ssh-config "$CONFIG" --host-discovery-script "$WORK/discover.sh" "$@" \
    >out 2>err </dev/null &
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
reached_step() { grep -q "step $1 size" out; }
# Shared-memory segments of hora's made since the case began (other jobs' are not this one's).
ls /dev/shm/ 2>/dev/null | grep '^hora-' >"$WORK/shm.before"
new_segments() { ls /dev/shm/ 2>/dev/null | grep '^hora-' | grep -vxF -f "$WORK/shm.before"; }
no_segments() { [ -z "$(new_segments)" ]; }

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
  # h2 goes away: its workers die (SIGKILL) and discovery stops listing it.
  hosts h1:2
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
  finish 180
  check_done 2
  grep -q "elastic: round 1: .* on h2 .*; new size 2 on h1:2" err || fail "no reset line: $(cat err)"
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
  hosts h1:2
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
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
  hosts h1:2
  kill -KILL $(pids_on h2 elastic_train) || fail "no worker on h2"
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
  start -np 4 --min-np 2 "$ELASTIC_TRAIN" --steps 1000 --step-ms 60
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
  hosts h1:2
  kill -KILL $(pids_on h2 python3) || fail "no worker on h2"
  finish 300
  [ $rc -eq 0 ] || fail "horarun exited $rc: $(tail -5 err)"
  grep -q "elastic: round 1: .* on h2 .*; new size 2 on h1:2" err || fail "no reset line: $(cat err)"
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

"case_$CASE"
