#!/bin/bash
# Tests on a real Slurm cluster: `slurm_test.sh CASE`. Every case brings up its own
# cluster (scripts/testslurm.sh up --index auto: munged, slurmctld and one slurmd per network
# namespace host h1..hN) and tears it down on exit, even on failure. Exit 77 (skip) without root,
# `ip netns` or the Slurm and munge binaries (scripts/setup.sh installs them).
# Environment: TESTSLURM (scripts/testslurm.sh), HORARUN and COLLECTIVES (the horarun cases).
# Every Slurm client runs under a deadline (`timeout`); waits poll a condition with a deadline.
set -u
CASE=${1:?usage: slurm_test.sh CASE}

# fail, ok, wait_for, gone, need_netns, begin_work, hosts_up
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

need_netns "network namespaces, Slurm daemons"
PATH="$PATH:/usr/sbin:/sbin"
for tool in srun sbatch salloc scancel squeue sinfo slurmctld slurmd munged; do
  command -v "$tool" >/dev/null || { echo "skip: no $tool (scripts/setup.sh installs Slurm)"; exit 77; }
done

# A suite run inside a Slurm job must not hand that job's variables to the test cluster's clients.
for v in $(compgen -e | grep '^SLURM_'); do unset "$v"; done

job="" job_state="" job_exit=""
begin_work slurm_test

# up N: a Slurm cluster of N nodes h1..hN with 4 CPUs each; sets INDEX, NET (198.18.K), SLURMDIR,
# and exports SLURM_CONF (without it the clients would look for a controller in DNS).
up() {
  hosts_up "$TESTSLURM" "$1"
  export SLURM_CONF
}

# slurm SECONDS COMMAND...: a Slurm client with a deadline, output in ./out and ./err; sets rc.
slurm() {
  local limit=$1; shift
  timeout -s KILL "$limit" "$@" >out 2>err
  rc=$?
  [ $rc -ne 137 ] || fail "$1 hung (killed after ${limit}s)"
}

# submit SBATCH_ARGS...: submits a batch job; sets job (its id).
submit() {
  slurm 30 sbatch --parsable "$@"
  [ $rc -eq 0 ] || fail "sbatch $*: rc=$rc"
  job=$(cut -d';' -f1 out)
  [[ "$job" =~ ^[0-9]+$ ]] || fail "no job id from sbatch"
}

# job_ended JOB: the job has left the running states; sets job_state and job_exit (status:signal).
# (Polled instead of `sbatch --wait`, which looks every 10 s.)
job_ended() {
  local info
  info=$(timeout 10 scontrol show job -o "$1" 2>/dev/null) || return 1
  job_state=$(tr ' ' '\n' <<<"$info" | sed -n 's/^JobState=//p')
  job_exit=$(tr ' ' '\n' <<<"$info" | sed -n 's/^ExitCode=//p')
  case "$job_state" in PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|"") return 1 ;; esac
}

# Processes of jobs on the nodes: everything in the cluster's namespaces but its daemons (and
# zombies, which are gone but for their parent's wait); prints "namespace pid comm" lines.
job_processes() {
  local ns pid comm state
  for ns in $(ip netns list | awk '{print $1}' | grep "^hora$INDEX-h"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      comm=$(cat /proc/$pid/comm 2>/dev/null) || continue
      state=$(awk '{print $3}' /proc/$pid/stat 2>/dev/null) || continue
      [ "$state" = Z ] && continue
      case "$comm" in sshd|munged|slurmctld|slurmscriptd|slurmd) continue ;; esac
      echo "$ns $pid $comm"
    done
  done
}
count_sleepers() { [ "$(job_processes | grep -c " sleep$")" -ge "$1" ]; }
no_job_processes() { [ -z "$(job_processes)" ]; }
no_jobs() { [ -z "$(timeout 10 squeue -h -o %i 2>/dev/null)" ]; }

# What a task prints to say where it runs: its node, its host name and its namespace's address.
WHERE='echo "task $SLURM_PROCID node $SLURMD_NODENAME host $(hostname) addr $(ip -o -4 addr show eth0 | awk "{print \$4}")"'

case_two_nodes() {
  up 2
  slurm 60 srun -N2 -n4 --ntasks-per-node=2 sh -c "$WHERE"
  [ $rc -eq 0 ] || fail "srun -N2 -n4: rc=$rc"
  [ "$(wc -l <out)" -eq 4 ] || fail "expected 4 task lines"
  for i in 1 2; do
    n=$(grep -c " node h$i host h$i addr $NET.1$i/24$" out)
    [ "$n" -eq 2 ] || fail "expected 2 tasks on h$i (in its namespace, host name h$i), got $n"
  done
  [ "$(sed 's/ node.*//' out | sort)" = "$(printf 'task %s\n' 0 1 2 3)" ] || fail "task ids are not 0..3"
  ok "srun -N2 -n4: two tasks on each node, in the node's namespace and under its host name"
}

case_plain_program() {
  up 2
  # A program that knows nothing of hora or Slurm: its stdout and stderr come back through srun,
  # and its exit status decides srun's.
  cat >prog.sh <<'EOF'
#!/bin/sh
echo "out from $(hostname) argument $1"
echo "err from $(hostname)" >&2
exit "$2"
EOF
  chmod +x prog.sh
  slurm 60 srun -N2 -n2 "$WORK/prog.sh" hello 0
  [ $rc -eq 0 ] || fail "srun prog.sh: rc=$rc"
  [ "$(sort out)" = "$(printf 'out from h1 argument hello\nout from h2 argument hello')" ] ||
    fail "stdout of both nodes did not come back"
  grep -qx "err from h1" err && grep -qx "err from h2" err || fail "stderr of both nodes did not come back"
  slurm 60 srun -N2 -n2 "$WORK/prog.sh" failing 3
  [ $rc -eq 3 ] || fail "a task's exit status 3 gave srun rc=$rc"
  # The same program in a batch job: the script runs on h1 and its srun reaches both nodes.
  submit -N2 -n2 -o "$WORK/batch.out" --wrap "echo script on \$(hostname); srun $WORK/prog.sh batch 0"
  wait_for 60 job_ended "$job" || fail "batch job $job not done after 60 s (state $job_state)"
  [ "$job_state" = COMPLETED ] && [ "$job_exit" = 0:0 ] || fail "batch job $job: $job_state, exit $job_exit"
  [ "$(sort batch.out)" = "$(printf 'err from h1\nerr from h2\nout from h1 argument batch\nout from h2 argument batch\nscript on h1')" ] ||
    { cat batch.out >&2; fail "unexpected batch output"; }
  ok "a plain program's stdout, stderr and exit status come back through srun and sbatch"
}

case_salloc() {
  up 3
  # Inside salloc the allocation's variables are set (what horarun reads: docs/slurm.md) and
  # srun runs in it without naming nodes again.
  slurm 60 salloc -N2 -n3 sh -c 'echo "nodelist $SLURM_JOB_NODELIST tasks $SLURM_TASKS_PER_NODE ntasks $SLURM_NTASKS"; srun sh -c "echo on \$SLURMD_NODENAME"'
  [ $rc -eq 0 ] || fail "salloc: rc=$rc"
  grep -qx "nodelist h\[1-2\] tasks 2,1 ntasks 3" out || fail "unexpected allocation variables"
  [ "$(grep -c '^on h1$' out)" -eq 2 ] && [ "$(grep -c '^on h2$' out)" -eq 1 ] ||
    fail "srun in the allocation did not run 2 tasks on h1 and 1 on h2"
  grep -q "Granted job allocation" err || fail "salloc did not report the allocation"
  ok "salloc -N2 -n3: SLURM_JOB_NODELIST=h[1-2], SLURM_TASKS_PER_NODE=2,1; srun inside follows it"
}

case_scancel() {
  up 2
  # Each task leaves a child behind it (`sleep &`): proctrack/linuxproc must find it too.
  timeout -s KILL 120 srun -N2 -n2 -J stuck sh -c 'sleep 300 & exec sleep 301' >out 2>err &
  BACKGROUND+=($!)
  local srun_pid=$!
  wait_for 30 count_sleepers 4 || { job_processes >&2; fail "the 4 sleeps did not start on the nodes"; }
  job_processes | grep -q "hora$INDEX-h1 .* sleep$" && job_processes | grep -q "hora$INDEX-h2 .* sleep$" ||
    fail "the sleeps are not on both nodes"
  timeout 10 scancel -n stuck || fail "scancel failed"
  wait_for 30 no_job_processes || { job_processes >&2; fail "processes left on the nodes 30 s after scancel"; }
  wait_for 30 gone "$srun_pid" || fail "srun still runs after scancel"
  wait_for 30 no_jobs || fail "the job is still in the queue"
  # A batch job whose step is cancelled with the job: the script and the step go.
  submit -N2 -n2 -o /dev/null --wrap 'srun sh -c "sleep 300 & exec sleep 301"'
  wait_for 30 count_sleepers 4 || { job_processes >&2; fail "the batch job's sleeps did not start"; }
  timeout 10 scancel "$job" || fail "scancel $job failed"
  wait_for 30 no_job_processes || { job_processes >&2; fail "processes left on the nodes 30 s after scancel $job"; }
  wait_for 30 job_ended "$job" || fail "batch job $job not ended 30 s after scancel"
  [ "$job_state" = CANCELLED ] || fail "batch job $job: $job_state after scancel"
  ok "scancel of a running srun and of a batch job leaves no process on any node"
}

case_testslurm_script() {
  up 2
  local conf=$SLURM_CONF dir=$SLURMDIR pids
  daemon_pids() { cat "$dir/munge/munged.pid" "$dir/ctld/slurmctld.pid" "$dir"/h*/slurmd.pid | tr '\n' ' '; }
  pids=$(daemon_pids)
  [ "$(wc -w <<<"$pids")" -eq 4 ] || fail "expected 4 daemons (munged, slurmctld, 2 slurmd): $pids"
  slurm 30 "$TESTSLURM" status --index "$INDEX"
  [ $rc -eq 0 ] || fail "status of an idle cluster: rc=$rc"
  [ "$(grep -c ' idle ' out)" -eq 2 ] || fail "status does not show 2 idle nodes"
  # Idempotent: the same `up` again keeps every daemon.
  slurm 60 "$TESTSLURM" up --index "$INDEX" --hosts 2
  [ $rc -eq 0 ] || fail "second up: rc=$rc"
  grep -qx "SLURM_CONF=$conf" out || fail "second up printed another SLURM_CONF"
  [ "$(daemon_pids)" = "$pids" ] || fail "second up restarted daemons: $pids -> $(daemon_pids)"
  # A node running a job is not idle: status says so.
  timeout -s KILL 60 srun -N1 -w h2 sleep 300 >/dev/null 2>&1 &
  BACKGROUND+=($!)
  wait_for 30 count_sleepers 1 || fail "the sleep did not start"
  slurm 30 "$TESTSLURM" status --index "$INDEX"
  [ $rc -eq 1 ] || fail "status with an allocated node: rc=$rc"
  grep -Eq "^h2 .* (mixed|allocated) " out || fail "status does not show h2 in use (mixed or allocated)"
  timeout 10 scancel -w h2 || fail "scancel -w h2"
  wait_for 30 no_job_processes || fail "the sleep survived scancel"
  # Another host count rewrites slurm.conf and restarts Slurm with a fresh state; job ids start
  # again at 1 and must not meet a spool that remembers the old job 1.
  slurm 60 "$TESTSLURM" up --index "$INDEX" --hosts 3
  [ $rc -eq 0 ] || { cat err >&2; fail "up --hosts 3: rc=$rc"; }
  slurm 60 srun -N3 hostname
  [ $rc -eq 0 ] && [ "$(sort out | tr '\n' ' ')" = "h1 h2 h3 " ] || fail "srun -N3 after growing: rc=$rc"
  slurm 60 "$TESTSLURM" down --index "$INDEX"
  [ $rc -eq 0 ] || fail "down: rc=$rc"
  local k=$INDEX; INDEX=""
  ! ip netns list | grep -q "^hora$k-" || fail "namespaces left: $(ip netns list | grep "^hora$k-")"
  [ ! -e "$dir" ] && [ ! -e "$(dirname "$dir")" ] || fail "state dir left"
  ! ls -d /etc/netns/hora"$k"-* >/dev/null 2>&1 || fail "/etc/netns entries left"
  for pid in $pids; do wait_for 10 gone_or_zombie "$pid" || fail "daemon $pid still runs"; done
  ok "testslurm.sh: idempotent up, status of idle and allocated nodes, growing, down leaves nothing"
}
gone_or_zombie() { gone "$1" || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

# ---------------------------------------------------------------- horarun through srun
# horarun inside an allocation, without -H: the hosts and slots come from Slurm's variables and
# each node's agent starts as a one-task srun step (cli/remote/slurm_agents.h). HORARUN and
# COLLECTIVES (test/integration/collectives_check) come from meson.

# horarun_job SECONDS SALLOC_ARGS -- HORARUN_ARGS...: horarun inside `salloc`, output in ./out
# and ./err; sets rc (horarun's, which salloc returns).
horarun_job() {
  local limit=$1; shift
  local salloc_args=()
  while [ "$1" != -- ]; do salloc_args+=("$1"); shift; done
  shift
  timeout -s KILL "$limit" salloc "${salloc_args[@]}" "$HORARUN" "$@" >out 2>err
  rc=$?
  [ $rc -ne 137 ] || fail "salloc horarun hung (killed after ${limit}s)"
}

case_horarun_collectives() {
  up 2
  # -np from the allocation (4), placed 3 + 1 by SLURM_TASKS_PER_NODE; every collective checked.
  horarun_job 180 -N2 -n4 -- sh -c 'echo "where $HORA_RANK $(hostname)"; exec "$0"' "$COLLECTIVES"
  check_collectives 4
  for r in 0 1 2; do grep -q "^\[$r\]<stdout>:where $r h1$" out || fail "rank $r not on h1"; done
  grep -q "^\[3\]<stdout>:where 3 h2$" out || fail "rank 3 not on h2"
  wait_for 30 no_job_processes || fail "processes left after the job: $(job_processes)"
  ok "salloc -N2 -n4 horarun: 4 ranks placed by the allocation, every collective checked through srun"
}

case_horarun_sbatch() {
  up 2
  # A batch script runs on h1: h1's ranks run there directly, h2's through its agent.
  submit -N2 -n2 -o "$WORK/batch.out" --wrap "$HORARUN sh -c 'echo rank \$HORA_RANK of \$HORA_SIZE on \$(hostname)'"
  wait_for 90 job_ended "$job" || fail "batch job $job not done after 90 s (state $job_state)"
  [ "$job_state" = COMPLETED ] && [ "$job_exit" = 0:0 ] || { cat batch.out >&2; fail "batch job $job: $job_state, exit $job_exit"; }
  grep -q "^\[0\]<stdout>:rank 0 of 2 on h1$" batch.out && grep -q "^\[1\]<stdout>:rank 1 of 2 on h2$" batch.out ||
    { cat batch.out >&2; fail "unexpected batch output"; }
  ok "horarun in an sbatch script, no -H: one rank on each node"
}

case_horarun_missing_program() {
  up 2
  # The program is checked on every node before any rank starts, as over SSH.
  horarun_job 120 -N2 -n2 -- hora-no-such-program --flag
  [ $rc -eq 1 ] || { cat err >&2; fail "horarun exited $rc, expected 1 (preflight)"; }
  for h in h1 h2; do
    grep -q "$h (srun): 'hora-no-such-program' is not found there in PATH=" err ||
      { cat err >&2; fail "the error does not name $h and the PATH searched"; }
  done
  wait_for 30 no_job_processes || fail "processes left after the preflight: $(job_processes)"
  ok "a program missing on the nodes: one preflight error naming each node through srun"
}

case_horarun_rank_fails() {
  up 2
  # Rank 3 (on h2) fails; the others would sleep for minutes: the job ends at once, naming it.
  horarun_job 120 -N2 -n4 -- sh -c 'if [ "$HORA_RANK" = 3 ]; then exit 7; fi; exec sleep 300'
  [ $rc -eq 7 ] || fail "horarun exited $rc, expected rank 3's code 7"
  grep -q "rank 3 on h2 exited with code 7" err || { cat err >&2; fail "the verdict does not name rank 3 on h2"; }
  wait_for 30 no_job_processes || fail "processes left after the failure: $(job_processes)"
  ok "a failing rank on a Slurm node ends the job with its code; nothing is left on any node"
}

case_horarun_sigkill() {
  up 2
  timeout -s KILL 120 salloc -N2 -n4 "$HORARUN" sleep 300 >out 2>err &
  BACKGROUND+=($!)
  wait_for 60 count_sleepers 4 || { job_processes >&2; fail "the 4 ranks did not start"; }
  local launcher
  launcher=$(pgrep -f -n "^$HORARUN sleep 300") || fail "no horarun process"
  kill -KILL "$launcher"
  wait_for 30 no_job_processes || fail "processes left 30 s after SIGKILL of horarun: $(job_processes)"
  ok "SIGKILL of horarun inside salloc: no rank or agent left on any node"
}

case_horarun_scancel() {
  up 2
  timeout -s KILL 120 salloc -N2 -n4 -J hora-scancel "$HORARUN" sleep 300 >out 2>err &
  local salloc_pid=$!
  BACKGROUND+=($salloc_pid)
  wait_for 60 count_sleepers 4 || { job_processes >&2; fail "the 4 ranks did not start"; }
  timeout 10 scancel -n hora-scancel || fail "scancel failed"
  wait_for 30 no_job_processes || fail "processes left 30 s after scancel: $(job_processes)"
  wait_for 30 gone "$salloc_pid" || fail "salloc still runs 30 s after scancel"
  ok "scancel of the allocation during a horarun job: no rank or agent left on any node"
}

case_horarun_in_srun_step() {
  up 2
  # `srun -n2 horarun ...` would start two launchers, each running the whole job: refused at once
  # by every task, naming the step and the supported ways.
  slurm 60 srun -N2 -n2 "$HORARUN" -np 1 sh -c 'echo ran on $(hostname)'
  [ $rc -eq 2 ] || { cat out err >&2; fail "srun -n2 horarun exited $rc, expected 2 (usage)"; }
  ! grep -q "ran on" out || fail "a rank ran although horarun is one task of a 2-task step"
  [ "$(grep -c "horarun is task [01] of 2 of the Slurm step [0-9]*\.0 (SLURM_STEP_NUM_TASKS=2)" err)" -eq 2 ] ||
    { cat err >&2; fail "not both tasks refused, naming the step and SLURM_STEP_NUM_TASKS"; }
  grep -q "salloc -N2 --ntasks-per-node=4 horarun python3 train.py" err &&
    grep -q "HORA_ALLOW_SRUN_STEP=1" err || { cat err >&2; fail "the message does not say what to run instead"; }
  # Asked for: each task runs a one-rank job of its own (both on the allocation's first slot).
  slurm 60 env HORA_ALLOW_SRUN_STEP=1 srun -N2 -n2 "$HORARUN" -np 1 sh -c 'echo ran on $(hostname)'
  [ $rc -eq 0 ] || { cat err >&2; fail "HORA_ALLOW_SRUN_STEP=1 srun -n2 horarun: rc=$rc"; }
  [ "$(grep -c '^\[0\]<stdout>:ran on h[12]$' out)" -eq 2 ] ||
    { cat out err >&2; fail "HORA_ALLOW_SRUN_STEP=1: expected two separate one-rank jobs"; }
  # A one-task step is not refused (as horarun's own agents are), nor is a batch script.
  slurm 60 srun -N1 -n1 "$HORARUN" -np 1 sh -c 'echo ran on $(hostname)'
  [ $rc -eq 0 ] && grep -q "ran on h1" out || { cat err >&2; fail "srun -n1 horarun: rc=$rc"; }
  submit -N2 -n2 -o "$WORK/batch.out" --wrap "$HORARUN sh -c 'echo batch rank \$HORA_RANK'"
  wait_for 90 job_ended "$job" || fail "batch job $job not done after 90 s (state $job_state)"
  [ "$job_state" = COMPLETED ] && [ "$(grep -c '<stdout>:batch rank [01]$' batch.out)" -eq 2 ] ||
    { cat batch.out >&2; fail "horarun in an sbatch script (2 tasks) was refused: $job_state"; }
  ok "srun -n2 horarun is refused with the supported ways; HORA_ALLOW_SRUN_STEP=1, srun -n1 and sbatch run"
}

"case_${CASE//-/_}"
