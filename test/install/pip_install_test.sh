#!/usr/bin/env bash
# `pip install --no-build-isolation .` of a copy of the source tree into a fresh venv made with
# Debian's python3 (--system-site-packages, for Debian's torch), then the venv's horarun runs
# hora.torch's allreduce at -np 2 with the venv's python. pip builds everything but the tests
# (pyproject.toml's meson args): the slowest test of the suite, ~15 min on 2 shared cores.
# Usage: pip_install_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d /tmp/hora-install-pip.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "pip_install_test: $*" >&2; exit 1; }

mkdir "$work/src"
# Tracked and untracked-but-not-ignored files: no build dirs.
git -C "$src" ls-files -co --exclude-standard -z | (cd "$src" && tar --null -T - -cf -) |
  tar -xf - -C "$work/src"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
# -O0 here: this test is about what gets installed where, and -O0 halves the compile time.
(cd "$work/src" && timeout 1500 "$work/venv/bin/pip" install --no-build-isolation --no-index \
  --config-settings=setup-args=-Doptimization=0 -q . >"$work/pip.log" 2>&1) || { tail -40 "$work/pip.log" >&2; fail "pip install failed"; }
[ -x "$work/venv/bin/horarun" ] || fail "pip did not install horarun into $work/venv/bin"

out=$(cd "$work" && PATH=$work/venv/bin:$PATH timeout 180 "$work/venv/bin/horarun" -np 2 \
  --start-timeout 120 python -c '
import hora.torch as hvd, torch, sys
assert hvd.__file__.startswith(sys.prefix), hvd.__file__
hvd.init()
t = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print("RESULT", hvd.rank(), t.item())
') || fail "horarun -np 2 python (hora.torch allreduce) failed: $out"
echo "$out"
[ "$(grep -c 'RESULT [01] 3.0' <<<"$out")" = 2 ] || fail "expected both ranks to print 3.0"
echo "pip_install_test: installed and ran at -np 2"
