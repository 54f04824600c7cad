#!/usr/bin/env bash
# Elastic soak: one elastic job on two namespace test hosts goes through many resets, and
# horarun's open descriptors and resident memory must stay flat (printed at the start and the
# end; a leak of one socket per round shows as fds growing with the rounds).
#
#   scripts/elastic_soak.sh [--resets N] [--build DIR]
#
# The job: examples/elastic_train, -np 4 --min-np 2 --max-np 4 on h1:2 and h2:2, a discovery
# script printing a file, --blacklist-cooldown-range 1 2. Resets alternate between
#   kill    SIGKILL to h2's workers: h2 is blacklisted, the job shrinks to h1, and h2 comes back
#           by itself when its cooldown ends (the discovery output never changes): two rounds
#   slots   the file says h1:1 (the job drops h1's surplus worker), then h1:2 again: two rounds
# until N resets (default 50) have happened. Needs root (network namespaces). Exits 1 when a
# reset did not happen within 120 s, when fds grew, or when anything is left afterwards.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
RESETS=50
while [ $# -gt 0 ]; do
  case $1 in
    --resets) RESETS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: scripts/elastic_soak.sh [--resets N] [--build DIR]" >&2; exit 2 ;;
  esac
done
HORARUN=$BUILD/cli/horarun
TRAIN=$BUILD/examples/elastic_train
TESTHOSTS=$ROOT/scripts/testhosts.sh
for f in "$HORARUN" "$TRAIN"; do
  [ -x "$f" ] || { echo "elastic_soak: $f is missing: build first (ninja -C $BUILD)" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 ||
  { echo "elastic_soak: needs root and ip netns (test hosts)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/hora-elastic-soak.XXXXXX)
INDEX=
PID=
cleanup() {
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
  [ -n "$INDEX" ] && "$TESTHOSTS" down --index "$INDEX" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
# wait_for SECONDS COMMAND..., gone PID
# shellcheck source=test/lib.sh
source "$ROOT/test/lib.sh"

vars=$("$TESTHOSTS" up --index auto --hosts 2 2>"$WORK/testhosts.log") ||
  { cat "$WORK/testhosts.log" >&2; echo "elastic_soak: testhosts.sh up failed" >&2; exit 1; }
eval "$vars"
INDEX=$HORA_TESTHOSTS_INDEX
hosts() { printf '%s\n' "$@" >"$WORK/hosts.new" && mv "$WORK/hosts.new" "$WORK/hosts"; }
printf '#!/bin/sh\ncat %s/hosts\n' "$WORK" >"$WORK/discover.sh"
chmod +x "$WORK/discover.sh"
pids_on() {
  local pid
  for pid in $(ip netns pids "hora$INDEX-$1" 2>/dev/null); do
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = elastic_train ] && echo "$pid"
  done
}
rounds() { grep -c "elastic: round [0-9]* formed" "$WORK/err"; }
at_least_rounds() { [ "$(rounds)" -ge "$1" ]; }  # read again on every poll of wait_for
fds() { ls "/proc/$PID/fd" 2>/dev/null | wc -l; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status" 2>/dev/null; }
# next_round N: waits until N rounds have formed (120 s), else fails the soak.
next_round() {
  wait_for 120 at_least_rounds "$1" ||
    { echo "elastic_soak: round $1 did not form within 120 s: $(tail -n 5 "$WORK/err")" >&2; exit 1; }
}

hosts h1:2 h2:2
"$HORARUN" --ssh-config "$HORA_TESTHOSTS_SSH_CONFIG" --host-discovery-script "$WORK/discover.sh" \
  -np 4 --min-np 2 --max-np 4 --blacklist-cooldown-range 1 2 --elastic-timeout 60 \
  "$TRAIN" --steps 1000000 --step-ms 20 >"$WORK/out" 2>"$WORK/err" </dev/null &
PID=$!
wait_for 120 grep -q "step 5 size 4" "$WORK/out" ||
  { echo "elastic_soak: the job did not start: $(tail -n 5 "$WORK/err")" >&2; exit 1; }
fd0=$(fds) rss0=$(rss) start=$SECONDS
echo "start: horarun fds $fd0, RSS $rss0 KiB"
resets=0 want=$(rounds) kind=kill
while [ "$resets" -lt "$RESETS" ]; do
  if [ "$kind" = kill ]; then
    victims=$(pids_on h2)
    [ -n "$victims" ] || { echo "elastic_soak: no worker on h2 to kill" >&2; exit 1; }
    kill -KILL $victims
    next_round $((want + 1))        # shrunk to h1
    next_round $((want + 2))        # h2 back after its cooldown
    kind=slots
  else
    hosts h1:1 h2:2
    next_round $((want + 1))
    hosts h1:2 h2:2
    next_round $((want + 2))
    kind=kill
  fi
  want=$((want + 2)) resets=$((resets + 2))
  [ $((resets % 10)) -eq 0 ] && echo "after $resets resets: horarun fds $(fds), RSS $(rss) KiB"
done
fd1=$(fds) rss1=$(rss)
echo "end ($resets resets in $((SECONDS - start)) s): horarun fds $fd1, RSS $rss1 KiB"
kill -INT "$PID"
wait_for 60 gone "$PID" || { echo "elastic_soak: horarun did not end after SIGINT" >&2; exit 1; }
PID=
left=$(pids_on h1; pids_on h2)
bad=0
[ -z "$left" ] || { echo "elastic_soak: workers left: $left" >&2; bad=1; }
[ "$fd1" -le "$fd0" ] || { echo "elastic_soak: horarun's descriptors grew from $fd0 to $fd1" >&2; bad=1; }
printf '| resets | horarun fds start | end | RSS start (KiB) | end |\n|---|---|---|---|---|\n| %d | %d | %d | %d | %d |\n' \
  "$resets" "$fd0" "$fd1" "$rss0" "$rss1"
exit "$bad"
