#!/usr/bin/env bash
# scripts/check_paths.py, the check that comments and docs name paths that exist: in a small git
# repo laid out like this one, every way of naming a path that exists passes (a :line suffix,
# punctuation, placeholders, globs, braces, build outputs, runtime paths, a cli/ subfolder, a
# test folder's own subfolder, ../shared); each stale reference then fails, named with its file and line. (scripts/test.sh
# runs the check on the real tree.) The paths below are the made-up tree's, so the real tree's
# check skips this file: check_paths: fixture
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
check="$src/scripts/check_paths.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
repo="$tmp/repo"

mkdir -p "$repo"/{cli/spawn,cli/network,docs,fuzz/corpus/wire,bench,test/cli/spawn} "$tmp/shared/horovod"
touch "$tmp/shared/horovod/x.tar.xz"
cd "$repo"
git init -q .
printf '/build*/\n/fuzz/corpus/*/crash-*\n' >.gitignore
touch cli/spawn/supervisor.h cli/spawn/supervisor.cc cli/network/probe.h docs/errors.md \
  fuzz/wire_fuzz.cc fuzz/corpus/wire/hello README.md test/cli/supervisor_test.cc \
  test/cli/spawn/guard_test.cc
printf "executable('rendezvous_bench', 'rendezvous_bench.cc')\n" >bench/meson.build
printf "foreach name : ['wire']\n  executable(name + '_fuzz', name + '_fuzz.cc')\nendforeach\n" \
  >fuzz/meson.build
cat >docs/good.md <<'END'
See `cli/spawn/supervisor.h:74`, cli/spawn/supervisor.{h,cc} and cli/spawn/supervisor.*.
The docs (docs/errors.md, "Bad inputs"); README.md. cli/spawn/ and cli/network.
A harness is fuzz/NAME_fuzz.cc, its corpus fuzz/corpus/<name>/ (<fuzz/corpus/<name>>);
fuzz/corpus/NAME/crash-WHAT.
Build outputs: build/cli/horarun, build-asan/x/y, bench/rendezvous_bench, fuzz/wire_fuzz.
Runtime paths: /dev/shm/hora-x, /proc/self/fd, $OUT/test/x, /tmp/docs/none.md; runtime/... too.
Beside the repo: ../shared/horovod/x.tar.xz.
Made up, on purpose: cli/none/x.h (check_paths: ignore).
END
printf '// The guard (spawn/supervisor.h, network/probe.h).\n' >cli/spawn/guard.h
printf '// As spawn/supervisor.h says.\n' >test/cli/guard_test.cc
# A test folder mirrors its source folder: its meson.build names its own subfolders.
printf "executable('guard_test', 'spawn/guard_test.cc')\n" >test/cli/meson.build
git add -A
git -c user.name=test -c user.email=test@localhost commit -qm base
python3 "$check" "$repo" >"$tmp/out" 2>&1 ||
  { echo "FAIL: a tree without stale paths is refused:"; cat "$tmp/out"; exit 1; }

# FILE LINE TEXT PATH: TEXT appended to FILE (as line LINE) fails naming PATH there.
expect() {
  printf '%s\n' "$3" >>"$1"
  if python3 "$check" "$repo" >"$tmp/out" 2>&1; then
    echo "FAIL: '$3' in $1 was accepted"; exit 1
  fi
  grep -qxF "$1:$2: names $4, which does not exist" "$tmp/out" ||
    { echo "FAIL: expected '$1:$2: names $4, ...' for '$3'; got:"; cat "$tmp/out"; exit 1; }
  git checkout -q HEAD -- "$1"
}
# shellcheck disable=SC2016  # the backquotes are the markdown's
expect docs/good.md 9 'Moved: `cli/spawn/env_forwarding.h:3`.' cli/spawn/env_forwarding.h
expect docs/good.md 9 'See docs/testing.md.' docs/testing.md
expect docs/good.md 9 'Both cli/spawn/supervisor.{h,cpp}' 'cli/spawn/supervisor.{h,cpp}'
expect docs/good.md 9 'Unpack ../shared/horovod/y.tar.xz' ../shared/horovod/y.tar.xz
expect cli/spawn/guard.h 2 '// see network/choice.h' 'network/choice.h (cli/network/choice.h)'
expect test/cli/guard_test.cc 2 '// see spawn/guard_request.h' \
  'spawn/guard_request.h (cli/spawn/guard_request.h)'
expect test/cli/meson.build 2 "executable('env_test', 'spawn/env_test.cc')" \
  'spawn/env_test.cc (cli/spawn/env_test.cc)'
echo "ok: check_paths passes a clean tree and names each stale path"
