#!/bin/bash
# Horovod programs under horarun: `horovod_test.sh CASE [ARGS]`.
# Environment: HORARUN (the launcher), WORKER (horovod_store_worker), TORCH_CHECK
# (horovod_torch_check.py), ELASTIC_TRAIN (horovod_elastic_train.py), REINIT (horovod_reinit.py),
# HOROVOD_ARCHIVE (Horovod 0.28.1 built for Debian's PyTorch).
# Every horarun run has a deadline (`timeout`). Exit 77: skipped (no archive or no PyTorch).
set -u
WORK=$(mktemp -d /tmp/horovod_test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# fail, ok, run, PYTHON, unpack_horovod
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# The hosts of an -np N job on this machine: one host (horarun refuses this machine under two
# names). Several local scopes and cross scopes of size 2 are covered by the remote
# cases (test/remote: horovod_store_hosts, horovod_torch_hosts) on the namespace test hosts.
hosts_for() {
  echo "localhost:$1"
}

case_store() {
  local np=$1
  run 120 -np "$np" -H "$(hosts_for "$np")" "$WORKER"
  [ $rc -eq 0 ] || fail "rc=$rc"
  [ "$(grep -c 'horovod-store ok' out)" -eq "$np" ] || fail "not every rank finished"
  ok "Horovod's HTTP store protocol at -np $np"
}

case_rejections() {
  run 120 -np 3 -H localhost:3 "$WORKER" rejections
  [ $rc -eq 0 ] || fail "rc=$rc"
  grep -q 'horovod-store rejections ok' out || fail "rank 0 did not see the three refusals"
  [ "$(grep -c 'horovod-store ok' out)" -eq 3 ] || fail "the job was harmed by the refusals"
  grep -q "body over the limit" err && grep -q "not one of this job's" err &&
    grep -q "malformed request" err || fail "the launcher did not log the refusals"
  ok "oversized body, unknown scope and malformed request line refused; the job unharmed"
}

case_start_timeout() {
  run 60 --start-timeout 3 -np 3 -H localhost:3 "$WORKER" skip-global 1
  [ $rc -eq 1 ] || fail "rc=$rc"
  grep -q "rank 1 on localhost did not reach the rendezvous within 3 s (2 of 3 ranks did)" err ||
    fail "the missing rank is not named"
  ok "a rank that never stores its address in 'global' is named at --start-timeout"
}

case_env() {
  run 30 -np 2 -H localhost:2 sh -c 'env | sort'
  [ $rc -eq 0 ] || fail "rc=$rc"
  for kv in HOROVOD_GLOO_RENDEZVOUS_ADDR=127.0.0.1 HOROVOD_GLOO_IFACE=lo HOROVOD_HOSTNAME=localhost \
            HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo; do
    grep -qx "\[1\]<stdout>:$kv" out || fail "rank 1 lacks $kv"
  done
  grep -q "^\[0\]<stdout>:HOROVOD_GLOO_RENDEZVOUS_PORT=[0-9]*$" out || fail "no port"
  run 30 --no-horovod-rendezvous -np 2 -H localhost:2 sh -c 'env | sort'
  [ $rc -eq 0 ] || fail "rc=$rc"
  ! grep -q "HOROVOD_GLOO_RENDEZVOUS" out || fail "--no-horovod-rendezvous still set the address"
  ok "HOROVOD_GLOO_* variables; --no-horovod-rendezvous"
}

case_torch() {
  local np=$1
  unpack_horovod
  run 240 -np "$np" -H "$(hosts_for "$np")" "$PYTHON" "$TORCH_CHECK"
  [ $rc -eq 0 ] || { cat err; fail "rc=$rc"; }
  [ "$(grep -c 'horovod-torch ok' out)" -eq "$np" ] || fail "not every rank passed"
  ok "a real Horovod PyTorch program at -np $np"
}

# torch_program SCRIPT OK_PATTERN WHAT: a real Horovod program at -np 2; every rank prints a line
# matching OK_PATTERN, and the launcher refused none of the ranks' requests to its rendezvous.
torch_program() {
  unpack_horovod
  run 240 -np 2 -H localhost:2 "$PYTHON" "$1"
  [ $rc -eq 0 ] || { cat err; fail "rc=$rc"; }
  ! grep -q "Horovod's rendezvous refused" err || { grep "refused" err; fail "$3: a request was refused"; }
  [ "$(grep -c "$2" out)" -eq 2 ] || fail "not every rank passed"
}

case_torch_elastic() {
  torch_program "$ELASTIC_TRAIN" 'horovod-elastic ok' "hvd.elastic.run"
  # The weights' checksum: the same on both ranks.
  [ "$(grep -o 'weights=[-0-9.]*' out | sort -u | wc -l)" -eq 1 ] ||
    fail "the ranks' weights differ: $(grep -o 'weights=[-0-9.]*' out | tr '\n' ' ')"
  ok "a real Horovod elastic program (hvd.elastic.run, TorchState, commit) in a fixed-size job"
}

case_torch_reinit() {
  torch_program "$REINIT" 'horovod-reinit ok .* rounds=3' "hvd.shutdown(); hvd.init()"
  ok "real Horovod: hvd.init(), allreduce, hvd.shutdown(), three rounds in one job"
}

"case_${1//-/_}" "${@:2}"
