#!/usr/bin/env bash
# Every test: installs, builds (with NCCL where CUDA and NCCL are found, and once more without it,
# so both configurations compile), then runs the whole suite. Extra arguments go to `meson test`
# (e.g. scripts/test.sh hosts_test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh build
# The CPU-only configuration must build too (it is what machines without CUDA get): libhora
# without NCCL, and the examples linked against it.
if [ ! -f build-cpu/build.ninja ]; then
  meson setup build-cpu -Dnccl=disabled -Dtests=disabled >/dev/null
fi
meson compile -C build-cpu hora fashion_mnist allreduce_bench >/dev/null

status=0
meson test -C build --print-errorlogs --num-processes 2 "$@" || status=$?

# One plain closing line, whatever the runner printed above.
python3 - build/meson-logs/testlog.json <<'PY' || true
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for line in open(sys.argv[1]):
    r = json.loads(line).get("result", "")
    if r in ("OK", "EXPECTEDFAIL"): counts["passed"] += 1
    elif r == "SKIP": counts["skipped"] += 1
    else: counts["failed"] += 1
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
exit "$status"
