#!/bin/bash
# Every bad input of a review of horarun's inputs, as one table: `bad_inputs.sh` (needs $HORARUN).
# Each row: a name, the expected exit code, words horarun's stderr must contain (fixed strings,
# ';'-separated), and the arguments (evaluated by bash, in a work directory holding the files
# made below; $M is a marker put in every command line). After each row no process whose
# command line holds the marker is left, and the row finished within 60 s (only to catch
# hangs). docs/errors.md, "Bad inputs", lists the same table.
set -u
M="bad-inputs-$$-marker"
WORK=$(mktemp -d /tmp/bad_inputs.XXXXXX)
# kill_marked: SIGKILL, by pid, every process whose command line holds the marker.
kill_marked() {
  local pids
  pids=$(pgrep -f "$M")
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  return 0
}
trap 'kill_marked; rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

# The files the rows name.
mkdir adir
mkfifo fifo
printf 'localhost\0slots=2\n' >nul_bytes
printf '#!/nonexistent/python9\n' >no_interpreter.sh && chmod +x no_interpreter.sh
printf '#!/bin/sh\necho localhost:x\n' >bad_discovery.sh && chmod +x bad_discovery.sh
awk 'BEGIN { for (i = 0; i < 32769; i++) printf "h%d slots=65536\n", i }' >huge_hostfile
printf 'params:\n  fusion_threshold_mb: 1e300\n' >big.yaml
printf 'params:\n  cycle_time_ms: 7: 8\n' >syntax.yaml
CTRL_HOST=$'a\x01b:1'  # a control character in -H, printed escaped
{ head -c 1000000 /dev/zero | tr '\0' a; echo ' slots=1'; } >long_host  # a 1 MB host name

ROWS=(
  # name | rc | words | args
  '-H ""               | 2   | --hosts: the value is empty             | -H "" true $M'
  '--hostfile ""       | 2   | --hostfile: the value is empty          | --hostfile "" true $M'
  '-np ""              | 2   | --num-proc: the value is empty          | -np "" true $M'
  '-np 0               | 2   | --num-proc;from 1 to 1048576            | -np 0 true $M'
  '-np -1              | 2   | --num-proc;from 1 to 1048576            | -np -1 true $M'
  '-np 99999999        | 2   | --num-proc;from 1 to 1048576            | -np 99999999 true $M'
  '-H a:0              | 2   | a:0;slot count must be at least 1       | -H a:0 true $M'
  '-H :2               | 2   | :2;the host name is empty               | -H :2 true $M'
  '-H a:2,,b:2         | 2   | empty item between commas               | -H a:2,,b:2 true $M'
  'hostfile directory  | 2   | --hostfile adir: is a directory         | --hostfile adir true $M'
  'hostfile FIFO       | 2   | --hostfile fifo;a FIFO                  | --hostfile fifo true $M'
  'hostfile /dev/zero  | 2   | --hostfile /dev/zero;a device           | --hostfile /dev/zero true $M'
  'hostfile NUL bytes  | 2   | contains NUL bytes                      | --hostfile nul_bytes true $M'
  '32769 x 65536 slots | 2   | 32769 hosts have 2147549184 slots;-np   | --hostfile huge_hostfile true $M'
  '-H control char     | 2   | host name;has the character;\x01        | -np 1 -H "$CTRL_HOST" true $M'
  '1 MB host name      | 2   | (1000000 bytes);longer than 253         | -np 1 --hostfile long_host true $M'
  'empty program       | 2   | the program to run is empty             | -np 1 "" $M'
  'fusion 1e300        | 2   | --fusion-threshold-mb;1e300             | -np 1 --fusion-threshold-mb 1e300 true $M'
  'cycle 1e300         | 2   | --cycle-time-ms;1e300                   | -np 1 --cycle-time-ms 1e300 true $M'
  'cycle -1            | 2   | --cycle-time-ms;-1                      | -np 1 --cycle-time-ms -1 true $M'
  'stall 1e300         | 2   | --stall-check-warning-time-seconds;1e300 | -np 1 --stall-check-warning-time-seconds 1e300 true $M'
  '--start-timeout 0   | 2   | --start-timeout;from 1 to 2592000       | -np 1 --start-timeout 0 true $M'
  'ssh-config /dev/zero | 2  | --ssh-config /dev/zero: is a device     | -np 1 --ssh-config /dev/zero true $M'
  'ssh-config directory | 2  | --ssh-config adir: is a directory       | -np 1 --ssh-config adir true $M'
  'network-interfaces "" | 2 | --network-interfaces: empty interface name | -np 1 --network-interfaces "" true $M'
  'missing command     | 127 | cannot run;No such file or directory;rank 0 on localhost exited with code 127 | -np 1 no-such-command-xyz $M'
  'command a directory | 126 | adir is a directory, not a program;exited with code 126 | -np 1 ./adir $M'
  'missing interpreter | 126 | interpreter '"'"'/nonexistent/python9'"'"' does not exist;exited with code 126 | -np 1 ./no_interpreter.sh $M'
  'one host, two names | 2   | hosts localhost and 127.0.0.1 are both this machine | -H localhost:2,127.0.0.1:2 true $M'
  'unknown option      | 2   | unknown option --no-such-option         | --no-such-option true $M'
  'option, no value    | 2   | --ssh-config has no value;-np, another option | --ssh-config -np 1 true $M'
  '--mpi               | 2   | --mpi: hora has no MPI mode             | --mpi -np 1 true $M'
  '--min-np 2          | 2   | an elastic job;needs its hosts;--host-discovery-script | --min-np 2 true $M'
  '--min-np 0          | 2   | --min-np;from 1 to 1048576              | -np 1 --min-np 0 -H localhost:1 true $M'
  'cooldown 100 10     | 2   | --blacklist-cooldown-range 100 10;give MIN MAX | -np 1 -H localhost:1 --min-np 1 --blacklist-cooldown-range 100 10 true $M'
  'script and -H       | 2   | --host-discovery-script and -H/--hosts both given | -np 1 --host-discovery-script ./d.sh -H localhost:1 true $M'
  'missing script      | 2   | --host-discovery-script;./no-such-script.sh;exited with code 127;cannot start without its hosts | -np 1 --host-discovery-script ./no-such-script.sh true $M'
  'script prints junk  | 2   | line 1;localhost:x;is not host:slots;cannot start without its hosts | -np 1 --host-discovery-script ./bad_discovery.sh true $M'
  'config-file /dev/zero | 2 | --config-file /dev/zero: is a device    | -np 1 --config-file /dev/zero true $M'
  'config-file FIFO    | 2   | --config-file fifo: is a FIFO           | -np 1 --config-file fifo true $M'
  'config-file dir     | 2   | --config-file adir: is a directory      | -np 1 --config-file adir true $M'
  'config 1e300        | 2   | params.fusion_threshold_mb;(as --fusion-threshold-mb) | -np 1 --config-file big.yaml true $M'
  'config YAML syntax  | 2   | --config-file syntax.yaml:2:19: YAML syntax error: illegal map value | -np 1 --config-file syntax.yaml true $M'
  '-x stall 1e300      | 2   | (as --stall-check-warning-time-seconds) | -np 1 -x HORA_STALL_CHECK_SECONDS=1e300 true $M'
  '-np twice           | 2   | -np is given 2 times (-np 2, -np 3)     | -np 2 -np 3 true $M'
  '-x without a value  | 2   | -x (--env) has no value                 | -x M=$M -np 1 -x'
  '--output-filename "" | 2  | --output-filename: the value is empty   | -np 1 --output-filename "" true $M'
)

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; echo "${s%"${s##*[![:space:]]}"}"; }

failures=0
for row in "${ROWS[@]}"; do
  IFS='|' read -r name want words args <<<"$row"
  name=$(trim "$name"); want=$(trim "$want"); words=$(trim "$words"); args=$(trim "$args")
  eval "set -- $args"
  timeout -s KILL 60 "$HORARUN" "$@" >out 2>err </dev/null
  rc=$?
  problems=()
  [ $rc -eq 137 ] && problems+=("hung (killed after 60 s)")
  [ $rc -eq "$want" ] || problems+=("exit $rc, expected $want")
  IFS=';' read -r -a needed <<<"$words"
  for w in "${needed[@]}"; do
    grep -qF -- "$w" err || problems+=("no '$w' in the message")
  done
  # Nothing left behind: no process with the marker in its command line.
  for _ in $(seq 100); do pgrep -f "$M" >/dev/null || break; sleep 0.05; done
  if pgrep -f "$M" >/dev/null; then
    problems+=("left processes: $(pgrep -af "$M" | head -3 | tr '\n' ' ')")
    kill_marked
  fi
  if [ ${#problems[@]} -eq 0 ]; then
    echo "ok: $name -> $rc"
  else
    echo "FAIL: $name: ${problems[*]}"
    sed 's/^/    /' err | head -5
    failures=$((failures + 1))
  fi
done
[ $failures -eq 0 ] || { echo "$failures of ${#ROWS[@]} rows failed"; exit 1; }
echo "all ${#ROWS[@]} bad inputs give their exit code and message, leave nothing behind"
