#!/usr/bin/env bash
# Culprit soak: many short jobs, half of them with one rank leaving mid-job, checking that horarun
# names the right rank with the right exit code every time, and that nothing is left behind.
# Not part of the default suite (it takes minutes); the culprit_* tests run single cases.
#
#   scripts/culprit_soak.sh [--jobs N] [--remote-share P] [--build DIR] [--seed S]
#
# Each job runs test/integration/exit_culprit.cc (C++) or exit_culprit.py (hora.torch) at a random
# -np of 2..4, on this host or (P% of the jobs, default 50; needs root, else all local) on two
# namespace test hosts of scripts/testhosts.sh. Half the jobs run clean (200 allreduces, exit 0);
# in the others a random rank leaves at a random step in a random way with a random code:
#   C++:    exit (libhora's exit handler says goodbye), atexit (the program's handler _exits),
#           quick_exit, _exit, signal (SIGTERM, SIGKILL, SIGSEGV, SIGABRT)
#   Python: sys.exit, os._exit, signal
# After each job (horarun has 180 s) it checks: horarun's last line names that rank and its code
# or signal, horarun's exit code is the rank's (128 + signal for a signal), a clean job exits 0
# with no message, no process started with the job's environment is left (30 s), no new
# /dev/shm segment is left, and horarun held no more descriptors at the rank's exit than at its
# start (read from /proc while it runs). Prints a table per language and place; exits 1 on any
# wrong culprit, wrong code or leftover.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
JOBS=200
REMOTE_SHARE=50
SEED=$$
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) JOBS=$2; shift 2 ;;
    --remote-share) REMOTE_SHARE=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    *) echo "usage: scripts/culprit_soak.sh [--jobs N] [--remote-share P] [--build DIR] [--seed S]" >&2; exit 2 ;;
  esac
done
RANDOM=$SEED
HORARUN=$BUILD/cli/horarun
CPP=$BUILD/test/integration/exit_culprit
PY=$ROOT/test/integration/exit_culprit.py
TESTHOSTS=$ROOT/scripts/testhosts.sh
for f in "$HORARUN" "$CPP"; do
  [ -x "$f" ] || { echo "culprit_soak: $f is missing: build first (ninja -C $BUILD)" >&2; exit 1; }
done
WORK=$(mktemp -d /tmp/hora-culprit-soak.XXXXXX)
# A snapshot of what the jobs run, so that a rebuild during the soak (minutes long) cannot swap
# horarun or libhora under a job; LD_LIBRARY_PATH wins over the programs' RUNPATH.
mkdir -p "$WORK/bin" "$WORK/lib"
cp "$HORARUN" "$CPP" "$WORK/bin/" &&
  find "$BUILD/runtime" -maxdepth 1 -name "libhora.so*" ! -type d -exec cp -P {} "$WORK/lib/" \; &&
  cp -r "$BUILD/python" "$WORK/python" 2>/dev/null
HORARUN=$WORK/bin/horarun CPP=$WORK/bin/exit_culprit
export LD_LIBRARY_PATH=$WORK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
HAVE_PY=1
PYTHONPATH=$WORK/python /usr/bin/python3 -c 'import hora.torch' 2>/dev/null || HAVE_PY=0
[ "$HAVE_PY" = 1 ] || echo "culprit_soak: hora.torch is not built: C++ jobs only" >&2

INDEX=
HPID=
cleanup() {
  [ -n "$HPID" ] && kill -KILL "$HPID" 2>/dev/null
  [ -n "$INDEX" ] && "$TESTHOSTS" down --index "$INDEX" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# wait_for SECONDS COMMAND..., gone PID
# shellcheck source=test/lib.sh
source "$ROOT/test/lib.sh"
job_pids() { grep -lsaz "^HORA_SOAK_JOB=$1$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
no_job_pids() { [ -z "$(job_pids "$1")" ]; }

if [ "$REMOTE_SHARE" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "culprit_soak: not root (network namespaces): every job local" >&2
    REMOTE_SHARE=0
  else
    vars=$("$TESTHOSTS" up --index auto --hosts 2 2>"$WORK/testhosts.log") ||
      { cat "$WORK/testhosts.log" >&2; echo "culprit_soak: testhosts.sh up failed" >&2; exit 1; }
    eval "$vars"
    INDEX=$HORA_TESTHOSTS_INDEX
    CONFIG=$HORA_TESTHOSTS_SSH_CONFIG
  fi
fi

CPP_WAYS=(exit atexit quick_exit _exit signal)
PY_WAYS=(sys.exit os._exit signal)
SIGNALS=(15 9 11 6)
declare -A N WRONG_RANK WRONG_CODE LEFT FDS SECS
pick() { local -n a=$1; echo "${a[$((RANDOM % ${#a[@]}))]}"; }

# hora's own segments (hora-*): other programs on the machine make and remove theirs meanwhile.
shm_list() { ls /dev/shm | grep '^hora-' | sort; }
shm_before=$(shm_list)
for ((j = 1; j <= JOBS; j++)); do
  lang=cpp
  [ "$HAVE_PY" = 1 ] && [ $((RANDOM % 2)) -eq 0 ] && lang=py
  where=local
  [ "$REMOTE_SHARE" -gt 0 ] && [ $((RANDOM % 100)) -lt "$REMOTE_SHARE" ] && where=hosts
  np=$((2 + RANDOM % 3))
  [ "$where" = hosts ] && np=$((2 * (1 + RANDOM % 2)))  # h1 and h2 take half each
  leaving=$((RANDOM % 2))
  culprit=$((RANDOM % np)) step=$((RANDOM % 150)) way=none code=0
  if [ "$leaving" = 1 ]; then
    if [ "$lang" = cpp ]; then way=$(pick CPP_WAYS); else way=$(pick PY_WAYS); fi
    if [ "$way" = signal ]; then code=$(pick SIGNALS); else code=$((1 + RANDOM % 120)); fi
  else
    culprit=-1
  fi
  if [ "$lang" = cpp ]; then prog=("$CPP" "${way/none/exit}" "$code" "$step" "$culprit" 200)
  else prog=(/usr/bin/python3 "$PY" "${way/none/sys.exit}" "$code" "$step" "$culprit" 200); fi
  hosts=(-H "localhost:$np")
  [ "$where" = hosts ] && hosts=(--ssh-config "$CONFIG" -H "h1:$((np / 2)),h2:$((np / 2))")
  key="$lang $where"
  dir=$WORK/job$j
  mkdir -p "$dir"
  start=$SECONDS
  # --start-timeout 120: importing torch on a loaded 2-core machine can take half a minute.
  timeout -s KILL 180 "$HORARUN" -np "$np" "${hosts[@]}" --start-timeout 120 \
    -x "HORA_SOAK_JOB=$j" -x "PYTHONPATH=$WORK/python" -x "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" \
    "${prog[@]}" >"$dir/out" 2>"$dir/err" &
  HPID=$!
  # horarun is timeout's child.
  hr=
  wait_for 5 eval 'hr=$(pgrep -P "$HPID" -x horarun)'
  fd_start=-1
  [ -n "$hr" ] && fd_start=$(ls "/proc/$hr/fd" 2>/dev/null | wc -l)
  fd_peak=$fd_start
  while kill -0 "$HPID" 2>/dev/null; do
    n=$([ -n "$hr" ] && ls "/proc/$hr/fd" 2>/dev/null | wc -l)
    [ -n "$n" ] && [ "$n" -gt "$fd_peak" ] && fd_peak=$n
    sleep 0.2
  done
  wait "$HPID"; rc=$?
  HPID=
  last=$(tail -n 1 "$dir/err")
  N[$key]=$((${N[$key]:-0} + 1))
  SECS[$key]=$((${SECS[$key]:-0} + SECONDS - start))
  if [ "$culprit" -lt 0 ]; then
    want_rc=0
    [ "$rc" -eq 0 ] || { echo "job $j ($key, clean, -np $np): rc $rc: $last" >&2; WRONG_CODE[$key]=$((${WRONG_CODE[$key]:-0} + 1)); }
  else
    if [ "$way" = signal ]; then
      want_rc=$((128 + code)); want="^horarun: rank $culprit on [^ ]+ was killed by signal $code "
    else
      want_rc=$code; want="^horarun: rank $culprit on [^ ]+ exited with code $code$"
    fi
    echo "$last" | grep -Eq "$want" ||
      { echo "job $j ($key, -np $np, rank $culprit $way $code at step $step): wrong culprit: $last" >&2
        WRONG_RANK[$key]=$((${WRONG_RANK[$key]:-0} + 1)); }
    [ "$rc" -eq "$want_rc" ] ||
      { echo "job $j ($key, -np $np, rank $culprit $way $code at step $step): rc $rc, want $want_rc" >&2
        WRONG_CODE[$key]=$((${WRONG_CODE[$key]:-0} + 1)); }
  fi
  if ! wait_for 30 no_job_pids "$j"; then
    echo "job $j ($key): processes left: $(job_pids "$j" | tr '\n' ' ')" >&2
    LEFT[$key]=$((${LEFT[$key]:-0} + 1))
    for p in $(job_pids "$j"); do kill -KILL "$p" 2>/dev/null; done
  fi
  shm_now=$(shm_list)
  new=$(comm -13 <(echo "$shm_before") <(echo "$shm_now") | grep -v '^$' || true)
  if [ -n "$new" ]; then
    echo "job $j ($key): left in /dev/shm: $(echo $new)" >&2
    LEFT[$key]=$((${LEFT[$key]:-0} + 1))
    for s in $new; do rm -f "/dev/shm/$s"; done
  fi
  FDS[$key]="${FDS[$key]:-} $fd_start-$fd_peak"
  rm -rf "$dir"
done

bad=0
printf '%-12s %5s %14s %12s %10s %14s %6s\n' "jobs" n "wrong culprit" "wrong code" "leftovers" "horarun fds" "s/job"
for k in "cpp local" "cpp hosts" "py local" "py hosts"; do
  [ -n "${N[$k]:-}" ] || continue
  fdr=$(echo ${FDS[$k]} | tr ' ' '\n' | sort -u | tr '\n' ' ')
  printf '%-12s %5d %14d %12d %10d %14s %6.1f\n' "$k" "${N[$k]}" "${WRONG_RANK[$k]:-0}" \
    "${WRONG_CODE[$k]:-0}" "${LEFT[$k]:-0}" "$(echo $fdr | tr ' ' ',')" "$(echo "${SECS[$k]} / ${N[$k]}" | bc -l)"
  bad=$((bad + ${WRONG_RANK[$k]:-0} + ${WRONG_CODE[$k]:-0} + ${LEFT[$k]:-0}))
done
echo "seed $SEED: $JOBS jobs, $bad wrong culprits, wrong codes or leftovers"
[ "$bad" -eq 0 ]
