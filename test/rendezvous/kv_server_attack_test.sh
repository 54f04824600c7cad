#!/bin/bash
# Horovod's HTTP key-value server attacked by another local user (uid 65534 through
# setpriv) while a real horarun job runs. `kv_server_attack_test.sh CASE`.
# Environment: HORARUN, WORKER (test/horovod/horovod_store_worker). Exit 77 without root/setpriv.
set -u
[ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null || { echo "needs root and setpriv"; exit 77; }
WORK=$(mktemp -d /tmp/kv_attack_test.XXXXXX)
ATTACK_PID=
cleanup() {
  [ -n "$ATTACK_PID" ] && kill "$ATTACK_PID" 2>/dev/null
  [ -n "${JOB_PID:-}" ] && kill "$JOB_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
chmod 755 "$WORK"
cd "$WORK"
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

NB=(setpriv --reuid 65534 --regid 65534 --clear-groups)

# The attacker: python as uid 65534. attack.py MODE PORT
cat >attack.py <<'PY'
import socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
def req(method, target, body=b"x"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
              % (method.encode(), target.encode(), len(body), body))
    try:
        print(method, target, s.recv(200).split(b"\r\n")[0].decode(), flush=True)
    except OSError as e:
        print(method, target, "error", e, flush=True)
    s.close()
if mode == "put":
    req("PUT", "/global/rank_0")
elif mode == "dos":
    held = []
    for i in range(72):  # half-sent requests, held open
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"PUT /global/rank_0 HTTP/1.1\r\nContent-Length: 10\r\n")
        held.append(s)
    for i in range(12):
        req("PUT", "/global/junk%d" % i)
    req("DELETE", "/global/0")
    req("DELETE", "/global/1")
    print("dos sent", flush=True)
    time.sleep(60)
elif mode == "flood":
    scope = "s" * 7000
    for i in range(1500):
        try:
            req("PUT", "/%s/k" % scope)
        except OSError:
            pass
    print("flood sent", flush=True)
PY

# A job whose ranks write the Horovod port, then wait for ./go (at most 20 s) and run "$@".
start_job() {
  local limit=$1; shift
  # START_TIMEOUT: 3 s shows a foreign PUT blaming a rank at once; the floods run with more, so a
  # loaded machine's slow attacker does not end the job before the ranks are let go.
  timeout -s KILL "$limit" "$HORARUN" --start-timeout "${START_TIMEOUT:-3}" -np 2 -H localhost:2 sh -c \
    'echo "$HOROVOD_GLOO_RENDEZVOUS_PORT" >port.$$ && mv port.$$ port; i=0
     while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; exec "$@"' sh "$@" \
    >out 2>err &
  JOB_PID=$!
  wait_for 20 test -s port || fail "the ranks never wrote the Horovod port"
  PORT=$(cat port)
}

finish_job() {
  touch go
  wait "$JOB_PID"; rc=$?; JOB_PID=
}

# 1: a PUT of rank 0's key by another user made the launcher wait for rank 1 and end the job.
case_foreign_put() {
  start_job 60 sleep 5
  "${NB[@]}" /usr/bin/python3 attack.py put "$PORT" >attack.out 2>&1
  finish_job
  [ $rc -eq 0 ] || fail "the job ended with $rc after another user's PUT: $(cat attack.out)"
  grep -q "belongs to uid 65534, not to the job's user" err ||
    fail "the launcher did not say why it refused uid 65534"
  ok "another user's PUT /global/rank_0 is refused and does not end a non-Horovod job"
}

# 2: half-sent requests, a filled key quota and DELETEs of scope global by another user.
case_foreign_dos() {
  START_TIMEOUT=60 start_job 90 "$WORKER"
  "${NB[@]}" /usr/bin/python3 attack.py dos "$PORT" >attack.out 2>&1 &
  ATTACK_PID=$!
  wait_for 20 grep -q "dos sent" attack.out || fail "the attack did not finish: $(cat attack.out)"
  finish_job
  kill "$ATTACK_PID" 2>/dev/null; ATTACK_PID=
  [ $rc -eq 0 ] || fail "the Horovod job ended with $rc under the attack"
  [ "$(grep -c 'horovod-store ok' out)" -eq 2 ] || fail "not every rank finished"
  grep -q "DELETE /global/0: DELETE" err && fail "the DELETE log line repeats its prefix"
  ok "72 held connections, 12 PUTs and DELETEs of global by another user do not harm the job"
}

# 3: refusals are rate-limited: 1,500 refused requests cost a few log lines, not 1,500.
case_refusal_flood() {
  START_TIMEOUT=60 start_job 120 "$WORKER"
  "${NB[@]}" /usr/bin/python3 attack.py flood "$PORT" >attack.out 2>&1
  grep -q "flood sent" attack.out || fail "the flood did not finish"
  finish_job
  [ $rc -eq 0 ] || fail "the Horovod job ended with $rc after the flood"
  [ "$(grep -c 'horovod-store ok' out)" -eq 2 ] || fail "not every rank finished"
  local lines
  lines=$(grep -c "refused" err)
  [ "$lines" -le 60 ] || fail "$lines refusal lines for one flood (not rate-limited)"
  grep -q "refused [0-9]* requests or connections from 127.0.0.1 in the last 1 s" err ||
    fail "no summary line counts the refusals"
  ok "1,500 refused requests logged in $lines lines; the job unharmed"
}

"case_${1//-/_}" "${@:2}"
