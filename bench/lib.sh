# shellcheck shell=bash
# Helpers of the bench scripts that watch a running job's output (bench/elastic_recovery.sh,
# bench/horovod_elastic.sh); source it.

# bench_wait_until SECONDS COMMAND...: runs COMMAND every 20 ms until it prints something, which
# is printed; returns 1 when SECONDS pass first.
bench_wait_until() {
  local end=$((SECONDS + $1)) got
  shift
  while :; do
    got=$("$@")
    [ -n "$got" ] && { echo "$got"; return 0; }
    [ $SECONDS -ge $end ] && return 1
    sleep 0.02
  done
}

# bench_nth_after N T PATTERN FILE: the stamp of the Nth line of FILE (lines from bench_stamp)
# stamped after T that matches PATTERN (an awk regular expression); nothing when there is none.
bench_nth_after() {
  awk -v n="$1" -v t="$2" -v pat="$3" '$1 > t && $0 ~ pat && ++seen == n { print $1; exit }' "$4"
}

# bench_stamp: each line read, after bash's wall clock in seconds (EPOCHREALTIME: no process
# per line, so the stamps are as close to the arrival as the reader).
bench_stamp() { local l; while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }

# bench_cleanup: the EXIT trap of a bench that keeps a running job's pid in $pid, its test hosts'
# index in $index and its folder in $work (the caller's locals: bash scopes them dynamically):
# kills the job, takes the hosts down, removes the folder (KEEP=1: keeps it and says where).
bench_cleanup() {
  [ -n "${pid:-}" ] && kill -KILL "$pid" 2>/dev/null
  [ -n "${index:-}" ] && scripts/testhosts.sh down --index "$index" >/dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}

# bench_hosts_up N: brings up N test hosts (scripts/testhosts.sh up --index auto) and sets the
# caller's $index and $config (their ssh_config); on failure prints why and returns 1.
bench_hosts_up() {
  local vars
  vars=$(scripts/testhosts.sh up --index auto --hosts "$1" 2>"$work/testhosts.log") ||
    { echo "skipped: scripts/testhosts.sh up failed: $(tail -3 "$work/testhosts.log")"; return 1; }
  eval "$vars"
  index=$HORA_TESTHOSTS_INDEX
  config=$HORA_TESTHOSTS_SSH_CONFIG
}
