#!/usr/bin/env bash
# A real Slurm cluster on the test hosts of scripts/testhosts.sh, for hora's Slurm tests.
#
# usage: scripts/testslurm.sh up     [--hosts N] [--cpus C] [--second-network] [--index K|auto]
#        scripts/testslurm.sh down   [--index K]
#        scripts/testslurm.sh status [--index K]
#
# `up` calls `scripts/testhosts.sh up --hosts N [--second-network] --index K|auto` (namespaces
# hora<K>-h1..hN on 198.18.K.0/24, sshd on each; see its header: every host it lists, the extra
# host of --second-network too, becomes a node) and starts, with Debian's slurm-wlm 22.05 and
# munge (scripts/setup.sh installs them):
#
#   munged       one for the cluster, in h1's namespace, with its own key and socket
#                <slurm>/munge/munge.socket (Slurm finds it through AuthInfo in slurm.conf; the
#                system's /run/munge is never used)
#   slurmctld    in h1's namespace on 198.18.K.11:6817 (SlurmctldHost=h1); each namespace has
#                its own ports, so clusters of different indexes never collide
#   slurmd       one per host, NodeName=h<i>, NodeAddr=198.18.K.(10+i), port 6818 in its namespace,
#                C CPUs (default 4, whatever the machine has: SlurmdParameters=config_overrides)
#   partition    `hora`, every node, the default
#
# where <slurm> is <state>/slurm and <state> the test hosts' state dir. Every daemon runs in a
# namespace, in its own UTS namespace whose host name is h<i>, so `srun hostname` prints the node
# name as on a real cluster and tasks see SLURMD_NODENAME=hostname. Clients (srun, sbatch,
# salloc, sinfo, scontrol, scancel) work from the root namespace and from inside a job; they find
# the cluster through SLURM_CONF (without it they look for the controller in DNS SRV records:
# always set it). `up` prints shell assignments on stdout, for
#   eval "$(scripts/testslurm.sh up --hosts 2 --index auto)"
#   HORA_TESTHOSTS_INDEX=K HORA_TESTHOSTS_DIR=<state> HORA_TESTHOSTS_SSH_CONFIG=<state>/ssh_config
#   HORA_TESTSLURM_DIR=<slurm> SLURM_CONF=<slurm>/slurm.conf, then `export SLURM_CONF`
#
# <slurm> holds: slurm.conf and cgroup.conf (generated), munge/ (munge.key, munge.socket,
# munged.pid, munged.log), ctld/ (slurmctld's StateSaveLocation, slurmctld.pid, slurmctld.log) and
# per node h<i>/ (spool/, slurmd.pid, slurmd.log).
#
# `up` is idempotent: it starts only what is not running; when slurm.conf changes (another --hosts
# or --cpus) it restarts slurmctld and every slurmd with a fresh controller state. It returns when
# every node is usable (idle, mixed, allocated or completing, and responding), or fails after 30 s
# with the tails of the daemons' logs. A failed `up` of a fresh set tears it down. `down` stops
# every Slurm daemon and munged (TERM, then KILL after 10 s), then runs `testhosts.sh down`, which
# kills whatever else runs in the namespaces (job steps) and removes namespaces and the state dir:
# nothing is left. `status` prints sinfo and exits 1 when a node is not idle.
#
# What does not work as on a real cluster here, and how it is handled:
#   - `ip netns exec` mounts a fresh sysfs without /sys/fs/cgroup, and slurmd 22.05 initialises
#     its cgroup plugin even without cgroup plugins configured: cgroup.conf names cgroup/v1
#     (initialised lazily, never used), and ProctrackType=proctrack/linuxproc (tracks a step's
#     processes by parent pid, so scancel kills their children too), TaskPlugin=task/none,
#     JobAcctGatherType=jobacct_gather/none.
#   - the namespaces share the host name: slurmctld refuses to run on a host whose name is not
#     SlurmctldHost and slurmd finds its NodeName from it, hence one UTS namespace per daemon
#     (`unshare --uts`, hostname h<i>) and `slurmd -N h<i>`.
#   - the namespaces share the file system: every pid, log and spool file is per node (%n).
#   - a restart with a fresh controller state (slurm.conf changed) numbers jobs from 1 again;
#     the slurmds' spools are wiped with it, else they refuse job 1 as "credential revoked".
#
# Traffic stays inside 198.18.K.0/24 and the Unix sockets of <slurm>. Needs root.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly HERE
readonly TESTHOSTS="$HERE/testhosts.sh"
readonly WAIT_SECONDS=30   # for slurmctld to answer and for every node to be usable
readonly STOP_SECONDS=10   # between TERM and KILL of a daemon

die() { echo "testslurm.sh: $*" >&2; exit 1; }
log() { echo "testslurm.sh: $*" >&2; }

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# ---------------------------------------------------------------- arguments
cmd="${1:-}"
[ -n "$cmd" ] || { usage >&2; exit 2; }
shift
hosts=""
second=0
cpus=4
index="${HORA_TESTHOSTS_INDEX:-0}"
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts="${2:?--hosts needs a number}"; shift 2 ;;
    --hosts=*) hosts="${1#*=}"; shift ;;
    --cpus) cpus="${2:?--cpus needs a number}"; shift 2 ;;
    --cpus=*) cpus="${1#*=}"; shift ;;
    --second-network) second=1; shift ;;
    --index) index="${2:?--index needs a number or auto}"; shift 2 ;;
    --index=*) index="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "testslurm.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
case "$cmd" in up|down|status) ;; -h|--help|help) usage; exit 0 ;;
  *) echo "testslurm.sh: unknown command '$cmd' (up, down or status)" >&2; exit 2 ;; esac
[[ "$cpus" =~ ^[0-9]+$ ]] && [ "$cpus" -ge 1 ] && [ "$cpus" -le 256 ] ||
  die "--cpus must be 1..256, got '$cpus'"
[ "$index" = auto ] || [ "$cmd" = up ] || [[ "$index" =~ ^[0-9]+$ ]] ||
  die "--index must be 0..255, got '$index'"
[ "$index" != auto ] || [ "$cmd" = up ] ||
  die "--index auto is only for 'up'; give the index that 'up' printed"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, Slurm daemons)"
PATH="$PATH:/usr/sbin:/sbin"
for tool in slurmctld slurmd sinfo scontrol munged mungekey unshare; do
  command -v "$tool" >/dev/null ||
    die "$tool not found; run scripts/setup.sh (slurmctld slurmd slurm-client munge)"
done

# ---------------------------------------------------------------- the set of test hosts
# After load_set: K, STATE, SL (the Slurm dir), NODES (aliases), NS_OF/ADDR_OF (alias -> ...).
declare -A NS_OF ADDR_OF
NODES=()
load_set() {  # assignments printed by testhosts.sh
  eval "$1"
  K="$HORA_TESTHOSTS_INDEX"
  STATE="$HORA_TESTHOSTS_DIR"
  SSH_CONFIG="$HORA_TESTHOSTS_SSH_CONFIG"
  SL="$STATE/slurm"
  export SLURM_CONF="$SL/slurm.conf"
  NODES=()
  local alias ns addr rest
  while read -r alias ns addr rest; do
    NODES+=("$alias"); NS_OF[$alias]="$ns"; ADDR_OF[$alias]="$addr"
  done <"$STATE/hosts"
  [ ${#NODES[@]} -ge 1 ] || die "no hosts in $STATE/hosts"
  CTL="${NODES[0]}"
}

# ---------------------------------------------------------------- daemons
# A daemon is identified by its pid file and its command name (a pid file left by a dead daemon
# may name a recycled pid); a zombie counts as gone.
pid_of() {  # pidfile comm -> prints the pid when that process runs
  local pid state comm
  pid="$(cat "$1" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  [ "$comm" = "$2" ] || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [ "$state" != Z ] || return 1
  echo "$pid"
}

stop_daemon() {  # pidfile comm what
  local pid deadline
  pid="$(pid_of "$1" "$2")" || { rm -f "$1"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_SECONDS))
  while pid_of "$1" "$2" >/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if pid_of "$1" "$2" >/dev/null; then
    log "$3 (pid $pid) still runs ${STOP_SECONDS} s after SIGTERM; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

# Runs a daemon in node's namespace, in a UTS namespace named after the node. The daemons fork
# into the background themselves; their pid files say where they went.
in_node() {  # node command...
  local node="$1"; shift
  ip netns exec "${NS_OF[$node]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$node" "$@"
}

wait_pidfile() {  # pidfile comm what log
  local deadline=$((SECONDS + WAIT_SECONDS))
  until pid_of "$1" "$2" >/dev/null; do
    [ $SECONDS -lt $deadline ] || { tail_log "$4"; die "$3 did not start within $WAIT_SECONDS s"; }
    sleep 0.05
  done
}

tail_log() { [ ! -f "$1" ] || { echo "--- $1" >&2; tail -n 30 "$1" >&2; }; }
tail_logs() {
  local node
  tail_log "$SL/munge/munged.log"
  tail_log "$SL/ctld/slurmctld.log"
  for node in "${NODES[@]}"; do tail_log "$SL/$node/slurmd.log"; done
}

start_munged() {
  local m="$SL/munge"
  pid_of "$m/munged.pid" munged >/dev/null && return 0
  # munged checks permissions: the socket's directory must be searchable by all, the key 0600.
  mkdir -p "$m"; chmod 755 "$m"
  [ -s "$m/munge.key" ] || mungekey --create --keyfile="$m/munge.key"
  chmod 600 "$m/munge.key"
  rm -f "$m/munge.socket" "$m/munge.socket.lock"
  in_node "$CTL" munged --socket="$m/munge.socket" --key-file="$m/munge.key" \
    --pid-file="$m/munged.pid" --log-file="$m/munged.log" --seed-file="$m/munged.seed" ||
    { tail_log "$m/munged.log"; die "munged did not start"; }
  wait_pidfile "$m/munged.pid" munged munged "$m/munged.log"
}

start_slurmctld() {
  local deadline
  if ! pid_of "$SL/ctld/slurmctld.pid" slurmctld >/dev/null; then
    mkdir -p "$SL/ctld"
    in_node "$CTL" slurmctld -f "$SLURM_CONF" ||
      { tail_log "$SL/ctld/slurmctld.log"; die "slurmctld did not start"; }
    wait_pidfile "$SL/ctld/slurmctld.pid" slurmctld slurmctld "$SL/ctld/slurmctld.log"
  fi
  deadline=$((SECONDS + WAIT_SECONDS))
  until timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; do
    [ $SECONDS -lt $deadline ] || { tail_logs; die "slurmctld does not answer on ${ADDR_OF[$CTL]}:6817 after $WAIT_SECONDS s"; }
    sleep 0.1
  done
}

start_slurmd() {  # node
  local node="$1"
  pid_of "$SL/$node/slurmd.pid" slurmd >/dev/null && return 0
  mkdir -p "$SL/$node/spool"
  in_node "$node" slurmd -f "$SLURM_CONF" -N "$node" ||
    { tail_log "$SL/$node/slurmd.log"; die "slurmd of $node did not start"; }
  wait_pidfile "$SL/$node/slurmd.pid" slurmd "slurmd of $node" "$SL/$node/slurmd.log"
}

stop_slurm() {  # the Slurm daemons, not munged
  local d node
  for d in "$SL"/h*/; do
    [ -d "$d" ] || continue
    node="$(basename "$d")"
    stop_daemon "$d/slurmd.pid" slurmd "slurmd of $node"
  done
  stop_daemon "$SL/ctld/slurmctld.pid" slurmctld slurmctld
}

# ---------------------------------------------------------------- configuration
write_config() {  # -> $SL/slurm.conf.new, $SL/cgroup.conf
  local node
  cat >"$SL/slurm.conf.new" <<EOF
# Slurm test cluster of scripts/testhosts.sh index $K, written by scripts/testslurm.sh.
# Use: SLURM_CONF=$SLURM_CONF srun -N2 hostname
ClusterName=hora$K
SlurmctldHost=$CTL(${ADDR_OF[$CTL]})
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SL/munge/munge.socket
StateSaveLocation=$SL/ctld
SlurmctldPidFile=$SL/ctld/slurmctld.pid
SlurmctldLogFile=$SL/ctld/slurmctld.log
SlurmctldDebug=info
SlurmdSpoolDir=$SL/%n/spool
SlurmdPidFile=$SL/%n/slurmd.pid
SlurmdLogFile=$SL/%n/slurmd.log
SlurmdDebug=info
# The configured CPUs, not the machine's: several tasks per node on a 2-core machine.
SlurmdParameters=config_overrides
# No cgroups inside \`ip netns exec\` (see cgroup.conf): track steps by parent pid.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
# scancel: SIGKILL 2 s after SIGTERM (default 30 s).
KillWait=2
EOF
  for node in "${NODES[@]}"; do
    echo "NodeName=$node NodeAddr=${ADDR_OF[$node]} CPUs=$cpus State=UNKNOWN" >>"$SL/slurm.conf.new"
  done
  echo "PartitionName=hora Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$SL/slurm.conf.new"
  cat >"$SL/cgroup.conf" <<EOF
# slurmd 22.05 initialises a cgroup plugin whatever else is configured; autodetection fails
# where /sys/fs/cgroup is not mounted (inside \`ip netns exec\`). Named, it is loaded and not used.
CgroupPlugin=cgroup/v1
CgroupAutomount=no
EOF
}

# Node states from sinfo, one "node state" line each; state "?" when sinfo cannot say.
node_states() { timeout 15 sinfo -h -N -o '%N %T' 2>/dev/null || true; }

wait_nodes_usable() {
  local deadline=$((SECONDS + WAIT_SECONDS)) states bad node state
  while :; do
    states="$(node_states)"
    bad=""
    for node in "${NODES[@]}"; do
      state="$(awk -v n="$node" '$1 == n {print $2}' <<<"$states")"
      case "$state" in idle|mixed|allocated|completing) ;; *) bad+=" $node:${state:-?}" ;; esac
    done
    [ -n "$bad" ] || return 0
    if [ $SECONDS -ge $deadline ]; then
      tail_logs
      die "nodes not usable after $WAIT_SECONDS s:$bad (sinfo -N; logs above)"
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- commands
do_up() {
  local d node
  mkdir -p "$SL"
  write_config
  if [ -f "$SLURM_CONF" ] && ! cmp -s "$SL/slurm.conf.new" "$SLURM_CONF"; then
    log "slurm.conf changed: restarting slurmctld and the slurmds with a fresh state"
    stop_slurm
    # Job ids start again at 1: a slurmd spool that remembers the old job 1's credential as
    # revoked would refuse the new job 1 ("Job credential revoked").
    rm -rf "${SL:?}/ctld" "$SL"/h*/spool
  fi
  mv "$SL/slurm.conf.new" "$SLURM_CONF"
  # Nodes of an earlier `up` with more hosts: testhosts.sh removed their namespaces.
  for d in "$SL"/h*/; do
    [ -d "$d" ] || continue
    node="$(basename "$d")"
    [ -n "${NS_OF[$node]:-}" ] || { stop_daemon "$d/slurmd.pid" slurmd "slurmd of $node"; rm -rf "$d"; }
  done
  start_munged
  start_slurmctld
  for node in "${NODES[@]}"; do start_slurmd "$node"; done
  wait_nodes_usable
  log "index $K: Slurm cluster hora$K up: ${#NODES[@]} nodes x $cpus CPUs, slurmctld ${ADDR_OF[$CTL]}:6817; SLURM_CONF=$SLURM_CONF"
  echo "HORA_TESTHOSTS_INDEX=$K"
  echo "HORA_TESTHOSTS_DIR=$STATE"
  echo "HORA_TESTHOSTS_SSH_CONFIG=$SSH_CONFIG"
  echo "HORA_TESTSLURM_DIR=$SL"
  echo "SLURM_CONF=$SLURM_CONF"
  echo "export SLURM_CONF"
}

do_down() {
  stop_slurm
  stop_daemon "$SL/munge/munged.pid" munged munged
  rm -rf "${SL:?}"
}

do_status() {
  local states bad=0 node state
  # Without its file sinfo would retry reading it for 60 s.
  [ -f "$SLURM_CONF" ] || { echo "index $K: test hosts but no Slurm cluster (run: scripts/testslurm.sh up --index $K)"; return 1; }
  timeout 15 sinfo -N -o '%N %P %T %c %E' || { echo "index $K: sinfo failed (is slurmctld up? scripts/testslurm.sh up --index $K)"; return 1; }
  states="$(node_states)"
  for node in "${NODES[@]}"; do
    state="$(awk -v n="$node" '$1 == n {print $2}' <<<"$states")"
    [ "$state" = idle ] || bad=1
  done
  return $bad
}

# ---------------------------------------------------------------- main
case "$cmd" in
  up)
    fresh=1
    if [ "$index" != auto ] && "$TESTHOSTS" env --index "$index" >/dev/null 2>&1; then fresh=0; fi
    args=(up --index "$index")
    [ -z "$hosts" ] || args+=(--hosts "$hosts")
    [ "$second" -eq 0 ] || args+=(--second-network)
    vars="$("$TESTHOSTS" "${args[@]}")" || die "testhosts.sh ${args[*]} failed"
    load_set "$vars"
    # A failed bring-up of a fresh set must not leave half a cluster behind.
    trap 'rc=$?; if [ $rc -ne 0 ] && [ $fresh -eq 1 ]; then log "up failed; tearing down index $K"; do_down || true; "$TESTHOSTS" down --index "$K" >&2 || true; fi' EXIT
    do_up
    trap - EXIT
    ;;
  down)
    if vars="$("$TESTHOSTS" env --index "$index" 2>/dev/null)"; then
      load_set "$vars"
      do_down
    fi
    "$TESTHOSTS" down --index "$index" >&2
    ;;
  status)
    vars="$("$TESTHOSTS" env --index "$index")" || exit 1
    load_set "$vars"
    do_status
    ;;
esac
