#!/usr/bin/env bash
# check_paths: fixture (names a made-up folder on purpose)
# scripts/check_layers.py, the build's check of cli/'s layer order (cli/meson.build): the real
# tree passes; an include against the order fails naming the file, the line and the layers; one
# along the order passes; a folder that is no layer is refused.
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
check="$src/scripts/check_layers.py"
layers=$(python3 - "$src/cli/meson.build" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"cli_layers = \[([^\]]*)\]", text)
print(" ".join(re.findall(r"'([^']+)'", m.group(1))))
PY
)
[ -n "$layers" ] || { echo "FAIL: no cli_layers in cli/meson.build"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck disable=SC2086
python3 "$check" --root "$src" $layers || { echo "FAIL: the real tree is refused"; exit 1; }

cp -r "$src/cli" "$tmp/cli"
# hosts/ is below spawn/: hosts including the supervisor runs the wrong way.
echo '#include "cli/spawn/supervisor.h"' >>"$tmp/cli/hosts/rank_table.cc"
# shellcheck disable=SC2086
if python3 "$check" --root "$tmp" $layers 2>"$tmp/err"; then
  echo "FAIL: hosts/ including spawn/ was accepted"; exit 1
fi
grep -q "cli/hosts/rank_table.cc:[0-9]*: includes cli/spawn/supervisor.h, but layer 'hosts'" \
  "$tmp/err" || { echo "FAIL: unexpected message:"; cat "$tmp/err"; exit 1; }

# The other way round is the order: spawn/ may include hosts/.
cp "$src/cli/hosts/rank_table.cc" "$tmp/cli/hosts/rank_table.cc"
echo '#include "cli/hosts/rank_table.h"' >>"$tmp/cli/spawn/guard.cc"
# shellcheck disable=SC2086
python3 "$check" --root "$tmp" $layers || { echo "FAIL: spawn/ including hosts/ was refused"; exit 1; }

# A new folder must be placed in the order before it is used.
mkdir "$tmp/cli/elsewhere" && echo '// x' >"$tmp/cli/elsewhere/x.h"
# shellcheck disable=SC2086
if python3 "$check" --root "$tmp" $layers 2>"$tmp/err"; then
  echo "FAIL: a folder outside the layers was accepted"; exit 1
fi
grep -q "cli/elsewhere/x.h: folder is not a layer" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "ok: cli/'s layer check"
