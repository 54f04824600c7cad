# shellcheck shell=bash
# bench_step_limit, sourced by scripts/bench.sh: what one training step of spark_start's model
# can cost at best with each framework's allreduce, across 2 test hosts x 1 rank, measured side by
# side in one horarun job (bench/step_limit_bench.py: compute alone, torch.distributed gloo's
# allreduce of the model's 1.08 MB of gradients, hora's, and whole DDP and hora.torch steps).
# Needs root and ip netns (test hosts) and hora.torch built (-Dtorch); uses the engines venv's
# Python, as spark_start does. Environment: SL_ITERS (100), SL_ROUNDS (5), SL_PARTS (all).

bench_step_limit() {
  heading "step_limit: a step's compute and each framework's allreduce, 2 test hosts x 1 rank" \
    "(medians of ${SL_ROUNDS:-5} interleaved rounds of ${SL_ITERS:-100} iterations)"
  local root py vars index ssh work rc=0
  root=$(pwd)
  py=$root/.venv-engines/bin/python
  [ -x "$py" ] || py=/usr/bin/python3
  if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "step_limit: skipped: needs root and ip netns for scripts/testhosts.sh"
    return 0
  fi
  if ! PYTHONPATH=$root/$BUILD_DIR/python "$py" -c 'import hora.torch' >/dev/null 2>&1; then
    echo "step_limit: skipped: hora.torch is not built in $BUILD_DIR (-Dtorch)"
    return 0
  fi
  vars=$(scripts/testhosts.sh up --index auto --hosts 2 2>/dev/null) ||
    { echo "step_limit: skipped: scripts/testhosts.sh up failed"; return 0; }
  index=$(sed -n 's/.*HORA_TESTHOSTS_INDEX=\([0-9]*\).*/\1/p' <<<"$vars")
  ssh=$(sed -n 's/.*HORA_TESTHOSTS_SSH_CONFIG=\([^ ]*\).*/\1/p' <<<"$vars")
  # A copy of horarun, so that a rebuild of the build directory meanwhile cannot pull it away.
  work=$(mktemp -d)
  cp "$root/$BUILD_DIR/cli/horarun" "$work/horarun"
  local args=(--iters "${SL_ITERS:-100}" --rounds "${SL_ROUNDS:-5}")
  [ -n "${SL_PARTS:-}" ] && args+=(--parts "$SL_PARTS")
  PYTHONPATH=$root/$BUILD_DIR/python OMP_NUM_THREADS=1 timeout 900 "$work/horarun" -np 2 \
    -H h1:1,h2:1 --ssh-config "$ssh" --start-timeout 120 "$py" bench/step_limit_bench.py \
    "${args[@]}" </dev/null 2>&1 | sed -n 's/^\[0\]<stdout>://p' || rc=$?
  scripts/testhosts.sh down --index "$index" >/dev/null 2>&1 || true
  rm -rf "$work"
  [ "$rc" -eq 0 ] || echo "(step_limit: failed, rc=$rc)"
}
