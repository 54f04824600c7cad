# shellcheck shell=bash
# bench_spark_start, sourced by scripts/bench.sh: hora.spark.run vs Spark's TorchDistributor vs
# Horovod 0.28.1's horovod.spark.run on a standalone Spark cluster across 2 test hosts
# (bench/spark_start_bench.py does the measuring and prints the tables).
#
# Needs root and ip netns (test hosts), the engines venv (scripts/venv.sh engines) and hora.torch
# built (-Dtorch). TorchDistributor's mapInArrow needs pandas and pyarrow, which the engines venv
# does not carry (nothing else needs them): they are installed once, pinned and without
# dependencies (numpy stays Debian's, which torch was built against), into a folder of their own
# under ~/.cache/hora that only this benchmark puts on PYTHONPATH.
# Environment: SS_REPEATS (3), SS_STEPS (20), SS_TIMEOUT (900 s), HOROVOD_ARCHIVE, SS_CONTENDERS
# (hora,td,horovod; also hora_groups1: DistributedOptimizer(groups=1), hora_c1 and hora_c50:
# HORA_CYCLE_TIME_MS=1 and 50).

SS_DEPS=(pandas==2.2.3 pyarrow==19.0.1 pytz==2025.2 tzdata==2025.2)

bench_spark_start() {
  heading "spark_start: hora.spark.run vs TorchDistributor vs horovod.spark.run, 2 test hosts x 1" \
    "rank, standalone Spark; median of ${SS_REPEATS:-3} interleaved runs"
  local root venv py deps hvd state index rc=0
  root=$(pwd)
  venv=$root/.venv-engines
  py=$venv/bin/python
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "spark_start: skipped: needs root and ip netns for scripts/testhosts.sh"
    return 0
  fi
  if [ ! -x "$py" ]; then
    echo "spark_start: skipped: no engines venv (scripts/venv.sh engines)"
    return 0
  fi
  if ! PYTHONPATH=$root/$BUILD_DIR/python "$py" -c 'import hora.torch, hora.driver._rendezvous' \
    >/dev/null 2>&1; then
    echo "spark_start: skipped: hora.torch or hora.driver is not built in $BUILD_DIR (-Dtorch)"
    return 0
  fi
  deps=$HOME/.cache/hora/spark-bench-$(printf '%s\n' "${SS_DEPS[@]}" | sha1sum | cut -c1-12)
  if [ ! -e "$deps/.done" ]; then
    if ! "$venv/bin/pip" install -q --no-deps --target "$deps" "${SS_DEPS[@]}" >&2; then
      echo "spark_start: skipped: pip install ${SS_DEPS[*]} failed"
      return 0
    fi
    touch "$deps/.done"
  fi
  hvd=$(mktemp -d)
  state=$hvd/state
  local archive=${HOROVOD_ARCHIVE:-$root/../shared/horovod/horovod-0.28.1-torch1.13-cpu-gloo.tar.xz}
  local contenders=${SS_CONTENDERS:-hora,td,horovod}
  if [ -r "$archive" ]; then
    tar -xJf "$archive" -C "$hvd"
  else
    echo "(no Horovod archive at $archive: horovod.spark.run left out)"
    contenders=${contenders//,horovod/}
  fi
  # The Python side takes its test hosts down itself; this covers a kill by `timeout` that left
  # it no time to (`down` ends every process in the namespaces: the master, workers, executors).
  # bench/spark_start_site: a fix for torchrun on Python 3.11, which TorchDistributor runs.
  PYTHONPATH=$root/$BUILD_DIR/python:$root/bench/spark_start_site:$deps:$hvd/site \
    timeout "${SS_TIMEOUT:-900}" "$py" \
    bench/spark_start_bench.py "$state" --repeats "${SS_REPEATS:-3}" --steps "${SS_STEPS:-20}" \
    --contenders "$contenders" </dev/null || rc=$?
  # The state file is gone once the Python side took its hosts down (the index may then be
  # another suite's already).
  index=$(cat "$state" 2>/dev/null || true)
  [ -z "$index" ] || scripts/testhosts.sh down --index "$index" >/dev/null 2>&1 || true
  rm -rf "$hvd"
  [ "$rc" -eq 0 ] || echo "(spark_start: failed, rc=$rc)"
}
