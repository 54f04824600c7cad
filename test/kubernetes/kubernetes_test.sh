#!/bin/bash
# horarun as the launcher of a Kubernetes MPIJob (kubeflow.org/v2beta1, the MPI Operator):
# `kubernetes_test.sh CASE`. No Kubernetes here: the launcher pod's files are laid out as the
# operator mounts them (examples/kubernetes/README.md), the worker pods are network-namespace test
# hosts (scripts/testhosts.sh up --index auto, torn down on exit even on failure), and horarun runs
# the launcher's command line in a private mount namespace (`unshare -m`) where /root/.ssh is a
# read-only bind mount, as a Secret volume is, and /etc/hosts plays the cluster DNS. Nothing of
# that namespace outlives the case. Exit 77 (skip) without root, `ip netns`, sshd or unshare.
# Environment: HORARUN, COLLECTIVES (collectives_check), TESTHOSTS (scripts/testhosts.sh).
set -u
CASE=${1:?usage: kubernetes_test.sh CASE}

# fail, ok, check_collectives, need_netns, need_sshd, begin_work, hosts_up
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

need_netns "network and mount namespaces"
need_sshd
{ command -v unshare && command -v ssh-keygen; } >/dev/null ||
  { echo "skip: no unshare or ssh-keygen"; exit 77; }
unshare -m --propagation private true 2>/dev/null || { echo "skip: unshare -m is not allowed"; exit 77; }
[ -f /etc/ssh/ssh_config ] || { echo "skip: no /etc/ssh/ssh_config to bind the pod's over"; exit 77; }
# Without /root/.ssh a tmpfs hides /root in the private namespace: the programs must not be there.
if [ ! -d /root/.ssh ]; then
  case "$HORARUN $COLLECTIVES" in
    */root/*) echo "skip: the build is under /root, which has no .ssh to bind over"; exit 77 ;;
  esac
fi

begin_work kubernetes_test

# up N: N test hosts h1..hN; sets INDEX, STATE (their state dir) and NET (198.18.K).
up() { hosts_up "$TESTHOSTS" "$1"; }

# pod JOB SLOTS [IMPLEMENTATION [POLICY]]: the launcher pod's files under $WORK/pod, as the
# operator makes them for MPIJob JOB in namespace default with two workers (h1, h2):
# IMPLEMENTATION Intel (default; MPICH alike: `host:N` lines) or OpenMPI (`host slots=N`), and the
# image's StrictHostKeyChecking POLICY (default no).
pod() {
  local job=$1 slots=$2 impl=${3:-Intel} policy=${4:-no} pod=$WORK/pod
  W0=$job-worker-0.$job.default.svc
  W1=$job-worker-1.$job.default.svc
  mkdir -p "$pod/etc/mpi" "$pod/etc/ssh" "$pod/root/.ssh"
  # ConfigMap <job>-config at /etc/mpi, key `hostfile`, mode 0444.
  if [ "$impl" = OpenMPI ]; then
    printf '%s slots=%s\n%s slots=%s\n' "$W0" "$slots" "$W1" "$slots" >"$pod/etc/mpi/hostfile"
  else
    printf '%s:%s\n%s:%s\n' "$W0" "$slots" "$W1" "$slots" >"$pod/etc/mpi/hostfile"
  fi
  chmod 0444 "$pod/etc/mpi/hostfile"
  # Secret <job>-ssh at /root/.ssh, mode 0600: an ECDSA P-521 key in PEM form named id_rsa, its
  # public half as id_rsa.pub and authorized_keys (newSSHAuthSecret, setupSSHOnPod).
  ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' -C '' -f "$pod/root/.ssh/id_rsa" || fail "ssh-keygen"
  cp "$pod/root/.ssh/id_rsa.pub" "$pod/root/.ssh/authorized_keys"
  chmod 0600 "$pod/root/.ssh/"*
  # The worker pods mount the same Secret: they authorise the same key.
  cat "$pod/root/.ssh/id_rsa.pub" >>"$STATE/authorized_keys"
  # An image's /etc/ssh/ssh_config as the operator's docs ask: StrictHostKeyChecking no, the
  # workers' sshd port (2222 in mpioperator/base, 12345 on the test hosts), and no
  # `UserKnownHostsFile /dev/null`: new host keys go to ~/.ssh/known_hosts, in the read-only Secret.
  printf 'Host *\n  StrictHostKeyChecking %s\n  Port 12345\n' "$policy" >"$pod/etc/ssh/ssh_config"
  # The headless Service's names, as the cluster DNS resolves them.
  printf '127.0.0.1 localhost\n%s.11 %s\n%s.12 %s\n' "$NET" "$W0" "$NET" "$W1" >"$pod/etc/hosts"
}

# launcher COMMAND...: COMMAND in a private mount namespace laid out as the launcher pod (the
# Secret bound read-only at /root/.ssh, over this machine's, or on a tmpfs that hides /root when
# it has none; the pod's ssh_config and /etc/hosts); output in ./out and ./err, rc set.
launcher() {
  local pod=$WORK/pod
  # shellcheck disable=SC2016
  timeout -s KILL 240 unshare -m --propagation private bash -c '
    set -e
    pod=$1; shift
    if [ ! -d /root/.ssh ]; then
      mount -t tmpfs -o mode=0700 pod-root /root
      mkdir /root/.ssh
    fi
    mount --bind "$pod/root/.ssh" /root/.ssh
    mount -o remount,bind,ro /root/.ssh
    mount --bind "$pod/etc/ssh/ssh_config" /etc/ssh/ssh_config
    mount --bind "$pod/etc/hosts" /etc/hosts
    if touch /root/.ssh/known_hosts 2>/dev/null; then echo "/root/.ssh is writable" >&2; exit 99; fi
    set +e
    exec "$@"' launcher "$pod" "$@" >out 2>err
  rc=$?
  [ $rc -ne 137 ] || fail "the launcher hung (killed after 240 s)"
  [ $rc -ne 99 ] || fail "the Secret mount at /root/.ssh is not read-only"
}

case_mpijob_launcher() {
  up 2
  pod hora-mnist 2
  # The launcher's command line of examples/kubernetes/mpijob.yaml, with the test program.
  launcher "$HORARUN" -np 4 --hostfile "$WORK/pod/etc/mpi/hostfile" \
    sh -c 'echo "where $HORA_RANK $HORA_HOSTNAME $(ip -o -4 addr show eth0 | awk "{print \$4}")"; exec "$0"' "$COLLECTIVES"
  [ $rc -eq 0 ] || { cat err >&2; fail "horarun as the MPIJob launcher exited $rc"; }
  check_collectives 4
  for r in 0 1; do grep -q "^\[$r\]<stdout>:where $r $W0 $NET.11/24$" out || fail "rank $r not on worker 0"; done
  for r in 2 3; do grep -q "^\[$r\]<stdout>:where $r $W1 $NET.12/24$" out || fail "rank $r not on worker 1"; done
  # The read-only known_hosts: one warning naming the file and the reason, as ssh goes on.
  [ "$(grep -c "cannot record the host key" err)" -eq 1 ] || { cat err >&2; fail "expected one warning about known_hosts"; }
  grep "cannot record the host key" err | grep -q "/root/.ssh/known_hosts: Read-only file system; connecting anyway (StrictHostKeyChecking is no)" ||
    { cat err >&2; fail "the warning does not name /root/.ssh/known_hosts and the read-only file system"; }
  [ ! -e "$WORK/pod/root/.ssh/known_hosts" ] || fail "known_hosts was written through the read-only mount"
  ok "MPIJob launcher: host:N hostfile at /etc/mpi, keys in a read-only Secret at /root/.ssh; 4 ranks, one warning"
}

case_mpijob_policies() {
  up 2
  # OpenMPI's hostfile form and StrictHostKeyChecking accept-new: the same single warning.
  pod hora-pi 1 OpenMPI accept-new
  launcher "$HORARUN" --hostfile "$WORK/pod/etc/mpi/hostfile" sh -c 'echo "rank $HORA_RANK of $HORA_SIZE on $HORA_HOSTNAME"'
  [ $rc -eq 0 ] || { cat err >&2; fail "accept-new with a read-only known_hosts: rc=$rc"; }
  grep -q "^\[0\]<stdout>:rank 0 of 2 on $W0$" out && grep -q "^\[1\]<stdout>:rank 1 of 2 on $W1$" out ||
    { cat out >&2; fail "the ranks did not run one on each worker"; }
  [ "$(grep -c "cannot record the host key .*Read-only file system; connecting anyway (StrictHostKeyChecking is accept-new)" err)" -eq 1 ] ||
    { cat err >&2; fail "expected one warning under accept-new"; }
  # StrictHostKeyChecking yes: an unknown worker is refused, as ssh refuses it, before any rank.
  rm -rf "$WORK/pod"
  pod hora-pi 1 OpenMPI yes
  launcher "$HORARUN" --hostfile "$WORK/pod/etc/mpi/hostfile" sh -c 'echo ran'
  [ $rc -eq 1 ] || { cat err >&2; fail "StrictHostKeyChecking yes with unknown workers: rc=$rc, expected 1"; }
  grep -q "is not known" err || { cat err >&2; fail "the refusal does not say the host key is not known"; }
  ! grep -q "ran" out || fail "a rank ran although the workers' keys are unknown"
  ok "MPIJob launcher: OpenMPI hostfile with accept-new warns once and runs; yes refuses unknown workers"
}

"case_${CASE//-/_}"
