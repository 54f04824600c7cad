#!/usr/bin/env bash
# Test hosts for hora's multi-host tests: network namespaces on a bridge, each running an sshd.
#
# usage: scripts/testhosts.sh up     [--hosts N] [--second-network] [--index K|auto]
#        scripts/testhosts.sh down   [--index K]
#        scripts/testhosts.sh status [--index K]
#        scripts/testhosts.sh env    [--index K]
#
# A set of test hosts is identified by its index K (0..255; --index, else $HORA_TESTHOSTS_INDEX,
# else 0). Several sets coexist, one per index, so concurrent test suites do not collide:
#
#   namespaces     hora<K>-h1 .. hora<K>-hN         (one "host" each)
#   bridge         hora<K>br0, root namespace 198.18.K.1/24 on it
#   host i         eth0 = 198.18.K.(10+i)/24, lo up, sshd on 198.18.K.(10+i):12345
#   state dir      $HORA_TESTHOSTS_DIR, else /tmp/hora-testhosts (K=0) or /tmp/hora-testhosts-K
#
# The state dir holds: id_ed25519{,.pub} (the test key, authorised for root on every host),
# authorized_keys, known_hosts (pre-filled with every host key), ssh_config (aliases h1..hN:
# HostName, Port 12345, User root, IdentityFile, UserKnownHostsFile, StrictHostKeyChecking
# accept-new), hosts (one line per host: alias namespace address [second-address second-iface]),
# and per host h<i>/ (host key, sshd_config, sshd.pid, sshd.log). Use the aliases with
#   ssh -F <state>/ssh_config h1 true      or      horarun --ssh-config <state>/ssh_config -H h1:2 ...
# Inside each namespace (for programs started with `ip netns exec`), /etc/hosts names the host's
# own address with this machine's name and its alias, and every other host's address with its
# alias (h1..hN resolve there as on a cluster; never from the root namespace).
#
# --second-network (a second data network for interface selection tests):
#   bridge hora<K>br1, root namespace 198.19.K.1/24 on it;
#   hosts h1..h(N-1): second interface eth1 = 198.19.K.(10+i)/24 on hora<K>br1;
#   host hN:          its second interface is named ens5 (same network, different name);
#   extra host h(N+1) (alias and sshd as usual, eth0 on the first network): its second interface
#                     eth1 = 198.19.K.(11+N)/24 sits on its own bridge hora<K>br2 that nothing else
#                     joins, so it is up and addressed but not routable to anyone.
#
# --index auto picks the lowest free index >= 1 (claimed atomically by creating its bridge).
# `up` prints shell assignments on stdout, e.g. eval "$(scripts/testhosts.sh up --index auto)":
#   HORA_TESTHOSTS_INDEX=K HORA_TESTHOSTS_DIR=... HORA_TESTHOSTS_SSH_CONFIG=...
#
# `up` is idempotent (creates only what is missing, keeps keys; re-running with fewer hosts or
# without --second-network removes the surplus). `down` kills every process in the namespaces,
# removes namespaces, veths, bridges and the state dir, and leaves nothing. `status` prints each
# host's reachability (a TCP connect to its sshd from the root namespace, no ping) and exits 1
# when a host is unreachable. `env` prints the assignments `up` printed, for a set that is up
# (exit 1 when it is not); scripts/testslurm.sh uses it. Needs root, iproute2 and openssh-server.
#
# Traffic stays inside 198.18.0.0/15: namespaces get no default route.
set -euo pipefail

readonly SSHD=/usr/sbin/sshd
readonly SSH_PORT=12345
readonly REGISTRY=/run/hora-testhosts   # index -> state dir, so `down` finds a custom dir

die() { echo "testhosts.sh: $*" >&2; exit 1; }
log() { echo "testhosts.sh: $*" >&2; }

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# ---------------------------------------------------------------- arguments
cmd="${1:-}"
[ -n "$cmd" ] || { usage >&2; exit 2; }
shift
hosts=3
second=0
index="${HORA_TESTHOSTS_INDEX:-0}"
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts="${2:?--hosts needs a number}"; shift 2 ;;
    --hosts=*) hosts="${1#*=}"; shift ;;
    --second-network) second=1; shift ;;
    --index) index="${2:?--index needs a number or auto}"; shift 2 ;;
    --index=*) index="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "testhosts.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
case "$cmd" in up|down|status|env) ;; -h|--help|help) usage; exit 0 ;;
  *) echo "testhosts.sh: unknown command '$cmd' (up, down, status or env)" >&2; exit 2 ;; esac
[[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le 100 ] \
  || die "--hosts must be 1..100, got '$hosts'"
if [ "$index" != auto ]; then
  [[ "$index" =~ ^[0-9]+$ ]] && [ "$index" -le 255 ] || die "--index must be 0..255 or auto, got '$index'"
  index=$((10#$index))
fi
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, sshd)"
command -v ip >/dev/null || die "ip (iproute2) not found; run scripts/setup.sh"
[ -x "$SSHD" ] || die "$SSHD not found; run scripts/setup.sh (openssh-server)"

# ---------------------------------------------------------------- names
set_names() {
  K="$1"
  NS_PREFIX="hora${K}-h"
  BR0="hora${K}br0"; BR1="hora${K}br1"; BR2="hora${K}br2"
  NET0="198.18.${K}"; NET1="198.19.${K}"
  if [ -n "${HORA_TESTHOSTS_DIR:-}" ]; then STATE="$HORA_TESTHOSTS_DIR"
  elif [ -f "$REGISTRY/$K" ]; then STATE="$(cat "$REGISTRY/$K")"
  elif [ "$K" -eq 0 ]; then STATE=/tmp/hora-testhosts
  else STATE="/tmp/hora-testhosts-$K"; fi
}
ns_name() { echo "${NS_PREFIX}$1"; }
veth0() { echo "hora${K}h$1a"; }   # root-side end of host i's eth0
veth1() { echo "hora${K}h$1b"; }   # root-side end of host i's second interface

# Namespaces of this index that exist now, as host numbers.
existing_hosts() {
  ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^${NS_PREFIX}\([0-9][0-9]*\)\$/\1/p" | sort -n
}
link_exists() { ip link show "$1" >/dev/null 2>&1; }

# TCP connect with a deadline, from the root namespace; bash's /dev/tcp, no ping.
tcp_ok() { timeout "${3:-2}" bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# ---------------------------------------------------------------- teardown of one host
stop_host() {
  local i="$1" ns pids deadline
  ns="$(ns_name "$i")"
  if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
    # Every process in the namespace belongs to this test host (sshd, sessions, leftover ranks).
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null || true
      deadline=$((SECONDS + 5))
      while [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do
        sleep 0.1
      done
      pids="$(ip netns pids "$ns" 2>/dev/null || true)"
      # shellcheck disable=SC2086
      [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
  fi
  rm -rf "/etc/netns/${ns:?}"
  # The root-side veth ends vanish with the namespace; remove them if a failed `up` left them.
  link_exists "$(veth0 "$i")" && ip link del "$(veth0 "$i")" 2>/dev/null || true
  link_exists "$(veth1 "$i")" && ip link del "$(veth1 "$i")" 2>/dev/null || true
  rm -rf "${STATE:?}/h$i"
}

remove_second_network() {
  local i
  for i in $(existing_hosts); do
    link_exists "$(veth1 "$i")" && ip link del "$(veth1 "$i")" 2>/dev/null || true
  done
  link_exists "$BR1" && ip link del "$BR1" || true
  link_exists "$BR2" && ip link del "$BR2" || true
}

do_down() {
  local i
  for i in $(existing_hosts); do stop_host "$i"; done
  # veths whose namespace is already gone
  for i in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(hora${K}h[0-9]*[ab]\)[@:].*/\1/p"); do
    ip link del "$i" 2>/dev/null || true
  done
  for br in "$BR1" "$BR2"; do link_exists "$br" && ip link del "$br" || true; done
  # Only remove a state dir that looks like ours (never an arbitrary $HORA_TESTHOSTS_DIR).
  if [ -d "$STATE" ] && { [ -f "$STATE/.hora-testhosts" ] || [ -z "$(ls -A "$STATE")" ]; }; then
    rm -rf "${STATE:?}"
  fi
  rm -f "$REGISTRY/$K"
  # The first bridge goes last: it is the index's claim (`up --index auto`), and a concurrent
  # `up` that takes the index once it is free must not see this teardown remove its state dir.
  link_exists "$BR0" && ip link del "$BR0" || true
  log "index $K down"
}

# ---------------------------------------------------------------- bring-up
ensure_bridge() {  # name [address/prefix]
  if ! link_exists "$1"; then ip link add "$1" type bridge; fi
  # No STP/forward delay: ports forward at once, so sshd is reachable when `up` returns.
  ip link set "$1" type bridge forward_delay 0 stp_state 0 2>/dev/null || true
  [ -z "${2:-}" ] || ip addr replace "$2" dev "$1"
  ip link set "$1" up
}

# veth pair: root end $1 on bridge $2, peer named $4 inside namespace $3 with address $5.
ensure_iface() {
  local root_end="$1" bridge="$2" ns="$3" name="$4" addr="$5"
  if ! ip -n "$ns" link show "$name" >/dev/null 2>&1; then
    link_exists "$root_end" && ip link del "$root_end"
    ip link add "$root_end" type veth peer name "$name" netns "$ns"
  fi
  ip link set "$root_end" master "$bridge" up
  ip -n "$ns" addr replace "$addr" dev "$name"
  ip -n "$ns" link set "$name" up
}

# /etc/hosts of host i's namespace (n_all hosts in the set). As on a real host, this machine's
# name resolves to the host's own address inside it (Gloo binds by host name where a program
# gives no interface, e.g. Horovod's process-set contexts), and so does its alias h<i> (a Slurm
# node of scripts/testslurm.sh has its own UTS namespace named h<i>); the other hosts' aliases
# resolve to their addresses. `ip netns exec` mounts /etc/netns/NS/hosts over /etc/hosts for
# sshd and its children. Rewritten in place, so running programs see a changed host count.
write_netns_hosts() {  # i n_all
  local i="$1" n_all="$2" ns j
  ns="$(ns_name "$i")"
  mkdir -p "/etc/netns/$ns"
  {
    echo "127.0.0.1 localhost"
    echo "$NET0.$((10 + i)) $(hostname) h$i"
    for ((j = 1; j <= n_all; j++)); do [ "$j" -eq "$i" ] || echo "$NET0.$((10 + j)) h$j"; done
  } >"/etc/netns/$ns/hosts"
}

start_sshd() {
  local i="$1" ns="$2" addr="$3" dir="$STATE/h$1" pid deadline
  if [ -f "$dir/sshd.pid" ]; then
    pid="$(cat "$dir/sshd.pid" 2>/dev/null || true)"
    if [ -n "$pid" ] && ip netns pids "$ns" | grep -qx "$pid"; then return 0; fi
    rm -f "$dir/sshd.pid"
  fi
  ip netns exec "$ns" "$SSHD" -f "$dir/sshd_config" -E "$dir/sshd.log"
  # sshd writes its pid file after binding the listening socket: wait for it, then connect.
  deadline=$((SECONDS + 10))
  until [ -s "$dir/sshd.pid" ] && tcp_ok "$addr" "$SSH_PORT" 1; do
    [ $SECONDS -lt $deadline ] || die "h$i: sshd did not come up on $addr:$SSH_PORT within 10 s; see $dir/sshd.log"
    sleep 0.05
  done
}

write_host_files() {  # i address
  local i="$1" addr="$2" dir="$STATE/h$1"
  mkdir -p "$dir"
  [ -f "$dir/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C "hora-testhost-$K-h$i" -f "$dir/ssh_host_ed25519_key"
  cat >"$dir/sshd_config" <<EOF
# sshd for test host h$i (namespace $(ns_name "$i")), written by scripts/testhosts.sh
Port $SSH_PORT
ListenAddress $addr
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $STATE/authorized_keys
StrictModes no
# One exec channel per rank shares a session; OpenSSH's default of 10 would cap ranks per host.
MaxSessions 100
MaxStartups 100:30:200
LogLevel VERBOSE
EOF
}

do_up() {
  local n_all i ns addr addr2 iface2 br2
  [ -d /run/sshd ] || { mkdir -p /run/sshd; chmod 755 /run/sshd; }
  mkdir -p "$REGISTRY"
  mkdir -p "$STATE"
  touch "$STATE/.hora-testhosts"
  echo "$STATE" >"$REGISTRY/$K"
  n_all=$hosts
  [ "$second" -eq 0 ] || n_all=$((hosts + 1))

  # Surplus from an earlier `up` with more hosts or with --second-network.
  for i in $(existing_hosts); do [ "$i" -le "$n_all" ] || stop_host "$i"; done
  [ "$second" -eq 1 ] || remove_second_network

  [ -f "$STATE/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C "hora-testhosts-$K" -f "$STATE/id_ed25519"
  cp "$STATE/id_ed25519.pub" "$STATE/authorized_keys"

  ensure_bridge "$BR0" "$NET0.1/24"
  if [ "$second" -eq 1 ]; then
    ensure_bridge "$BR1" "$NET1.1/24"
    ensure_bridge "$BR2"   # the isolated host's private segment: no address, no other member
  fi

  : >"$STATE/known_hosts.new"
  : >"$STATE/hosts.new"
  {
    echo "# Test hosts of scripts/testhosts.sh index $K; use: ssh -F $STATE/ssh_config h1"
  } >"$STATE/ssh_config.new"
  for ((i = 1; i <= n_all; i++)); do
    ns="$(ns_name "$i")"
    addr="$NET0.$((10 + i))"
    ip netns list | awk '{print $1}' | grep -qx "$ns" || ip netns add "$ns"
    ip -n "$ns" link set lo up
    ensure_iface "$(veth0 "$i")" "$BR0" "$ns" eth0 "$addr/24"
    addr2="" iface2=""
    if [ "$second" -eq 1 ]; then
      addr2="$NET1.$((10 + i))"
      iface2=eth1 br2="$BR1"
      [ "$i" -ne "$hosts" ] || iface2=ens5
      [ "$i" -ne "$n_all" ] || br2="$BR2"
      # A host whose second interface changed name (ens5 <-> eth1) after a re-run: drop the old one.
      for old in eth1 ens5; do
        [ "$old" = "$iface2" ] || ip -n "$ns" link del "$old" 2>/dev/null || true
      done
      ensure_iface "$(veth1 "$i")" "$br2" "$ns" "$iface2" "$addr2/24"
    fi
    write_host_files "$i" "$addr"
    write_netns_hosts "$i" "$n_all"
    start_sshd "$i" "$ns" "$addr"
    echo "[$addr]:$SSH_PORT $(cut -d' ' -f1,2 "$STATE/h$i/ssh_host_ed25519_key.pub")" >>"$STATE/known_hosts.new"
    echo "h$i $ns $addr${addr2:+ $addr2 $iface2}" >>"$STATE/hosts.new"
    cat >>"$STATE/ssh_config.new" <<EOF

Host h$i
  HostName $addr
  Port $SSH_PORT
  User root
  IdentityFile $STATE/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $STATE/known_hosts
  StrictHostKeyChecking accept-new
  BatchMode yes
EOF
  done
  mv "$STATE/known_hosts.new" "$STATE/known_hosts"
  mv "$STATE/hosts.new" "$STATE/hosts"
  mv "$STATE/ssh_config.new" "$STATE/ssh_config"
  if [ "$second" -eq 1 ]; then
    log "index $K up: $n_all hosts on $NET0.0/24, second network $NET1.0/24 (h$hosts: ens5, h$n_all: isolated eth1); state in $STATE"
  else
    log "index $K up: $n_all hosts on $NET0.0/24; state in $STATE"
  fi
  print_env
}

print_env() {
  echo "HORA_TESTHOSTS_INDEX=$K"
  echo "HORA_TESTHOSTS_DIR=$STATE"
  echo "HORA_TESTHOSTS_SSH_CONFIG=$STATE/ssh_config"
}

do_env() {
  link_exists "$BR0" && [ -f "$STATE/hosts" ] ||
    die "index $K is not up (run: scripts/testhosts.sh up --index $K)"
  print_env
}

do_status() {
  local i ns addr bad=0 n=0
  for i in $(existing_hosts); do
    n=$((n + 1))
    ns="$(ns_name "$i")"
    addr="$NET0.$((10 + i))"
    if tcp_ok "$addr" "$SSH_PORT" 2; then
      echo "h$i $ns $addr:$SSH_PORT reachable"
    else
      echo "h$i $ns $addr:$SSH_PORT UNREACHABLE"
      bad=1
    fi
  done
  if [ "$n" -eq 0 ]; then echo "index $K: no test hosts (run: scripts/testhosts.sh up --index $K)"; return 1; fi
  return $bad
}

# ---------------------------------------------------------------- main
claimed=""
if [ "$cmd" = up ] && [ "$index" = auto ]; then
  # Claim the lowest free index by creating its bridge: `ip link add` fails if it exists, so two
  # concurrent callers never get the same index.
  for ((k = 1; k <= 255; k++)); do
    if ip link add "hora${k}br0" type bridge 2>/dev/null; then claimed=$k; break; fi
  done
  [ -n "$claimed" ] || die "no free index in 1..255 (every hora<K>br0 bridge exists)"
  index=$claimed
elif [ "$index" = auto ]; then
  die "--index auto is only for 'up'; give the index that 'up' printed"
fi
set_names "$index"

case "$cmd" in
  up)
    # A failed bring-up of a fresh set must not leave half a set behind (a re-run over a working
    # set keeps what was there).
    fresh=1
    if [ -z "$claimed" ] && link_exists "$BR0"; then fresh=0; fi
    trap 'rc=$?; if [ $rc -ne 0 ] && [ $fresh -eq 1 ]; then log "up failed; tearing down index $K"; do_down || true; fi' EXIT
    do_up
    trap - EXIT
    ;;
  down) do_down ;;
  status) do_status ;;
  env) do_env ;;
esac
