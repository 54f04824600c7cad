#!/usr/bin/env bash
# scripts/bench.sh keras_steps: Keras 3 training steps per second on a communication-heavy
# model (bench/keras_steps_bench.py: a 10.5 M-parameter MLP, batch 16 per rank), hora.keras
# against tf.distribute.MultiWorkerMirroredStrategy, at -np 2 on this host and on 2 test hosts
# x 1 (scripts/testhosts.sh; skipped without root), the contenders interleaved, median of
# KS_REPEATS (3) runs of KS_STEPS (20) timed steps each; then one allreduce of 4 B and 16 MiB
# from a TF tensor (hora.tensorflow, tf.distribute's CollectiveAllReduce) beside hora's C++
# allreduce_bench. Every job is started by horarun. Run from the repository root.
set -uo pipefail
BUILD_DIR=${BUILD_DIR:-build}
root=$(pwd)
py=$root/.venv-tf/bin/python
export PYTHONPATH=$root/$BUILD_DIR/python TF_CPP_MIN_LOG_LEVEL=2
# KS_ALLREDUCE_ONLY=1 (scripts/bench.sh tf_allreduce): only the allreduce rows.
if ! "$py" -c 'import hora.keras' >/dev/null 2>&1; then
  echo "keras_steps: skipped: hora.keras is not importable by $py (scripts/venv.sh tf, then build)"
  exit 0
fi
# A copy of horarun, so that a rebuild of the build directory during the long run does not
# pull it from under a job (horarun links no library of the build).
work=$(mktemp -d)
cp "$root/$BUILD_DIR/cli/horarun" "$work/horarun"
horarun=$work/horarun
bench=$root/bench/keras_steps_bench.py

# A free TCP port on this machine for each MultiWorkerMirroredStrategy worker.
free_ports() {
  "$py" -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("", 0))
print(",".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# run_one CONFIG HOSTS SSH_CONFIG FRAMEWORK LOOP [ARGS...]: prints the steps/s (empty on failure,
# with the output on stderr).
run_one() {
  local config=$1 hosts=$2 ssh=$3 fw=$4 loop=$5
  shift 5
  local -a cmd=("$horarun" -np 2 -H "$hosts")
  [ -n "$ssh" ] && cmd+=(--ssh-config "$ssh")
  local -a extra=()
  if [ "$fw" = mwms ]; then
    local ports h1 h2
    ports=$(free_ports 2)
    if [ "$config" = np2-1host ]; then h1=localhost h2=localhost; else h1=h1 h2=h2; fi
    extra=(--workers "$h1:${ports%,*},$h2:${ports#*,}")
  fi
  local out
  out=$(timeout 900 "${cmd[@]}" "$py" "$bench" --framework "$fw" --loop "$loop" \
    --steps "${KS_STEPS:-20}" "${extra[@]}" "$@" 2>&1 </dev/null)
  local v
  v=$(sed -n 's/.*steps_per_sec=\([0-9.]*\).*/\1/p' <<<"$out" | head -1)
  [ -z "$v" ] && { echo "keras_steps: $config $fw $loop failed:" >&2; tail -20 <<<"$out" >&2; }
  echo "$v"
}

median() {
  sort -n | awk '{ v[n++] = $1 } END { if (n == 0) { print "-"; exit }
    printf "%s %s-%s\n", (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1] }'
}

configs=("np2-1host localhost:2 -")
trap 'rm -rf "$work"' EXIT
index="" ssh=""
if [ "${KS_ALLREDUCE_ONLY:-0}" = 1 ]; then
  configs=()
elif [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 &&
  vars=$(scripts/testhosts.sh up --index auto --hosts 2 2>/dev/null); then
  eval "$vars"
  index=$HORA_TESTHOSTS_INDEX ssh=$HORA_TESTHOSTS_SSH_CONFIG
  trap 'scripts/testhosts.sh down --index "$index" >/dev/null 2>&1; rm -rf "$work"' EXIT
  configs+=("2hosts-x1 h1:1,h2:1 $ssh")
else
  echo "(2 hosts x 1: skipped: needs root and ip netns for scripts/testhosts.sh)"
fi

contenders=("hora fit" "hora custom" "mwms custom")
results=$(mktemp)
for spec in "${configs[@]}"; do
  read -r name hosts cfg <<<"$spec"
  [ "$cfg" = - ] && cfg=""
  echo "$name: load before: $(uptime | sed 's/.*load average: //')"
  for ((rep = 0; rep < ${KS_REPEATS:-3}; rep++)); do
    for ((i = 0; i < ${#contenders[@]}; i++)); do
      c=${contenders[(i + rep) % ${#contenders[@]}]}
      # shellcheck disable=SC2086
      echo "$name $c $(run_one "$name" "$hosts" "$cfg" $c)" >>"$results"
    done
  done
  echo "$name: load after:  $(uptime | sed 's/.*load average: //')"
done
[ ${#configs[@]} -gt 0 ] && printf '\n%-10s %-14s %14s %14s %16s\n' config contender "median steps/s" "min-max" "/ mwms custom"
for spec in "${configs[@]}"; do
  read -r name _ <<<"$spec"
  base=$(awk -v n="$name" '$1 == n && $2 == "mwms" { print $4 }' "$results" | median | cut -d' ' -f1)
  for c in "${contenders[@]}"; do
    read -r med range < <(awk -v n="$name" -v f="${c% *}" -v l="${c#* }" \
      '$1 == n && $2 == f && $3 == l && $4 != "" { print $4 }' "$results" | median)
    printf '%-10s %-14s %14s %14s %16s\n' "$name" "${c/ //}" "$med" "${range:--}" \
      "$(awk -v a="$med" -v b="$base" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')"
  done
done
rm -f "$results"

echo
echo "allreduce of one float32 tensor, -np 2 on this host, median of 20 (us; C++: mean of its"
echo "default runs), KS_AR_REPEATS (5) rounds, each running hora.tensorflow, the C++ bench, then"
echo "tf.distribute (KS_AR_MWMS=0 leaves it out) one after the other; the ratio is to that round's C++:"
ar_results=$(mktemp)
ar_run() { # ar_run ROUND FRAMEWORK: prints "round framework bytes to_numpy_us op_us" rows
  local extra=()
  [ "$2" = mwms ] && { p=$(free_ports 2); extra=(--workers "localhost:${p%,*},localhost:${p#*,}"); }
  timeout 600 "$horarun" --start-timeout 180 -np 2 "$py" "$bench" --framework "$2" --allreduce "${extra[@]}" 2>&1 |
    sed -n -e "s/.*allreduce_us bytes=\([0-9]*\) us=\([0-9.]*\) op_us=\([0-9.]*\).*/$1 $2 \1 \2 \3/p" \
      -e "s/.*allreduce_c_us bytes=\([0-9]*\) op_us=\([0-9.]*\) c_us=\([0-9.]*\) ratio=\([0-9.]*\).*/$1 inproc \1 \2 \3 \4/p"
}
for ((rep = 0; rep < ${KS_AR_REPEATS:-5}; rep++)); do
  ar_run "$rep" hora
  "$horarun" -np 2 "$root/$BUILD_DIR/bench/allreduce_bench" -b 4 -e 16M -f 4194304 \
    --collective allreduce -c 0 2>&1 | awk -v rep="$rep" '/^\[0\]<stdout>: +[0-9]/ {
      print rep, "cpp", $2, "-", $7 }'
  [ "${KS_AR_MWMS:-1}" = 1 ] && ar_run "$rep" mwms
done >"$ar_results"
printf '  %-5s %-34s %10s %14s %14s %10s\n' round contender bytes "to numpy (us)" "op (us)" "op / C++"
awk '$2 != "inproc" { key = $1 " " $3 } $2 == "cpp" { cpp[key] = $5 } $2 != "inproc" { row[++n] = $0 } END {
  for (i = 1; i <= n; i++) { split(row[i], f, " "); key = f[1] " " f[3]
    name = f[2] == "hora" ? "hora.tensorflow allreduce" : f[2] == "mwms" ? \
      "tf.distribute CollectiveAllReduce" : "C++ allreduce_bench (out of place)"
    printf "  %-5s %-34s %10s %14s %14s %10s\n", f[1], name, f[3], f[4], f[5], \
      (cpp[key] > 0 ? sprintf("%.2f", f[5] / cpp[key]) : "-") } }' "$ar_results"
# The median over the rounds of hora's 16 MiB times / that round's C++ time.
for col in 5 4; do
  awk -v c=$col '$3 == 16777216 && $2 == "cpp" { cpp[$1] = $5 }
    $3 == 16777216 && $2 == "hora" { t[$1] = $c } END {
    for (r in t) if (cpp[r] > 0) print t[r] / cpp[r] }' "$ar_results" | median |
    awk -v c=$col '{ printf "  16 MiB, hora.tensorflow %s / C++: median %s over the rounds (min-max %s)\n",
      (c == 5 ? "op" : "to numpy"), $1, $2 }'
done
# The op and the same allreduce called from C in the same job, one after the other on every
# iteration (keras_steps_bench.py interleaved_with_c: both meet the same load).
echo "  hora.tensorflow's op and libhora's async allreduce from C in the same job, interleaved:"
printf '  %-5s %10s %14s %14s %20s\n' round bytes "op (us)" "C (us)" "median of op / C"
awk '$2 == "inproc" { printf "  %-5s %10s %14s %14s %20s\n", $1, $3, $4, $5, $6 }' "$ar_results"
awk '$2 == "inproc" && $3 == 16777216 { print $6 }' "$ar_results" | median |
  awk '{ printf "  16 MiB, op / C in the same job: median %s over the rounds (min-max %s)\n", $1, $2 }'
rm -f "$ar_results"
