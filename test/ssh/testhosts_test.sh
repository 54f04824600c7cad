#!/usr/bin/env bash
# scripts/testhosts.sh end to end: up (a fresh index), status, ssh through the alias file with
# OpenSSH's own client, idempotent re-up, shrinking, --second-network layout, and a down that
# leaves nothing behind. Exits 77 (skipped) without root or network namespaces.
set -euo pipefail
script="${1:-$(dirname "$0")/../../scripts/testhosts.sh}"

if [ "$(id -u)" -ne 0 ]; then echo "skipped: needs root" >&2; exit 77; fi
probe="hora-probe-$$"
if ! ip netns add "$probe" 2>/dev/null; then echo "skipped: ip netns unavailable" >&2; exit 77; fi
ip netns del "$probe"

fail() { echo "FAIL: $*" >&2; exit 1; }
K=""
cleanup() { [ -z "$K" ] || "$script" down --index "$K" >/dev/null 2>&1 || true; }
trap cleanup EXIT

up_log=$(mktemp)
vars=$("$script" up --index auto --hosts 2 2>"$up_log") || { cat "$up_log" >&2; rm -f "$up_log"; fail "up --index auto failed (its log is above)"; }
rm -f "$up_log"
eval "$vars"
K=$HORA_TESTHOSTS_INDEX
S=$HORA_TESTHOSTS_DIR
CFG=$HORA_TESTHOSTS_SSH_CONFIG
[ -f "$CFG" ] || fail "no ssh_config at $CFG"
echo "index $K, state $S"

# `env` prints what `up` printed.
[ "$("$script" env --index "$K")" = "$vars" ] || fail "env differs from up's assignments"

# Inside each namespace the aliases resolve as on a cluster: its own to its address (with this
# machine's name), the others to theirs.
resolve() { ip netns exec "hora$K-$1" getent hosts "$2" | tr -s ' '; }  # host name
[ "$(resolve h1 h1)" = "198.18.$K.11 $(hostname) h1" ] || fail "h1 in h1: $(resolve h1 h1)"
[ "$(resolve h1 h2)" = "198.18.$K.12 h2" ] || fail "h2 in h1: $(resolve h1 h2)"
[ "$(resolve h2 "$(hostname)")" = "198.18.$K.12 $(hostname) h2" ] ||
  fail "this machine's name in h2: $(resolve h2 "$(hostname)")"

"$script" status --index "$K" | tee /dev/stderr | grep -c reachable | grep -qx 2 || fail "status: not 2 reachable hosts"

# OpenSSH's client, through the aliases (BatchMode: never prompts).
out=$(timeout 20 ssh -F "$CFG" h2 'ip -o -4 addr show dev eth0; echo err >&2; exit 7' 2>/dev/null) && rc=0 || rc=$?
[ "$rc" -eq 7 ] || fail "ssh h2 exit status $rc, want 7"
echo "$out" | grep -q "inet 198.18.$K.12/24" || fail "h2 eth0 is not 198.18.$K.12: $out"

# Hosts reach each other over the bridge.
timeout 20 ssh -F "$CFG" h1 "timeout 3 bash -c 'exec 3<>/dev/tcp/198.18.$K.12/12345'" || fail "h1 cannot reach h2"

# Re-running up keeps keys and sshds (idempotent).
fp1=$(ssh-keygen -lf "$S/h1/ssh_host_ed25519_key.pub")
pid1=$(cat "$S/h1/sshd.pid")
HORA_TESTHOSTS_INDEX=$K "$script" up --hosts 2 >/dev/null 2>&1
[ "$(ssh-keygen -lf "$S/h1/ssh_host_ed25519_key.pub")" = "$fp1" ] || fail "re-up changed h1's host key"
[ "$(cat "$S/h1/sshd.pid")" = "$pid1" ] || fail "re-up restarted h1's sshd"
timeout 20 ssh -F "$CFG" h1 true || fail "ssh h1 after re-up"

# --second-network: h1 eth1, h2 ens5 (last regular host), extra h3 isolated eth1.
"$script" up --index "$K" --hosts 2 --second-network >/dev/null 2>&1
grep -qx "h1 hora$K-h1 198.18.$K.11 198.19.$K.11 eth1" "$S/hosts" || fail "hosts file: $(cat "$S/hosts")"
grep -qx "h2 hora$K-h2 198.18.$K.12 198.19.$K.12 ens5" "$S/hosts" || fail "hosts file: $(cat "$S/hosts")"
grep -qx "h3 hora$K-h3 198.18.$K.13 198.19.$K.13 eth1" "$S/hosts" || fail "hosts file: $(cat "$S/hosts")"
# sshd listens on eth0 only, so on the second network a reachable host answers "refused" at
# once, and an isolated one does not answer at all.
reach() {  # from-alias to-address -> prints refused|unreachable
  local out
  out=$(timeout 20 ssh -F "$CFG" "$1" "timeout 2 bash -c 'exec 3<>/dev/tcp/$2/12345' 2>&1" || true)
  case "$out" in *refused*) echo refused ;; *) echo unreachable ;; esac
}
[ "$(reach h1 198.19.$K.12)" = refused ] || fail "h1 -> h2 over the second network"
[ "$(reach h2 198.19.$K.11)" = refused ] || fail "h2 -> h1 over the second network"
[ "$(reach h3 198.19.$K.11)" = unreachable ] || fail "isolated h3 reaches h1 over the second network"
[ "$(reach h1 198.19.$K.13)" = unreachable ] || fail "h1 reaches isolated h3 over the second network"

# Shrinking removes the surplus hosts and the second network.
"$script" up --index "$K" --hosts 1 >/dev/null 2>&1
ip netns list | grep -q "^hora$K-h2 " && fail "h2 survived shrinking"
ip link show "hora${K}br1" >/dev/null 2>&1 && fail "second bridge survived"

# A process left running in a namespace is killed by down.
ip netns exec "hora$K-h1" sleep 300 &
sleeper=$!
"$script" down --index "$K" >/dev/null 2>&1
K_done=$K; K=""
wait "$sleeper" 2>/dev/null || true
ip netns list | grep -q "^hora$K_done-" && fail "namespaces left: $(ip netns list)"
ip -o link show | grep -q "hora${K_done}\(br\|h\)" && fail "links left: $(ip -o link show | grep hora$K_done)"
[ ! -e "$S" ] || fail "state dir $S left"
[ ! -e "/run/hora-testhosts/$K_done" ] || fail "registry entry left"
"$script" env --index "$K_done" >/dev/null 2>&1 && fail "env succeeds for an index that is down"
pgrep -f "$S/h1/sshd_config" >/dev/null && fail "sshd left running"
echo "ok"
