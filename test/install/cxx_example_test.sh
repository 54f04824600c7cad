#!/usr/bin/env bash
# The README's C++ example built against `meson install --destdir` of the existing build dir (no
# rebuild) with pkg-config and with CMake, each run under the installed horarun at -np 2
# (readme_example.sh): about 20 s on 2 cores, most of it CMake's configure.
# Usage: cxx_example_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d /tmp/hora-install-cxx.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "cxx_example_test: $*" >&2; exit 1; }
source "$(dirname "$0")/readme_example.sh"

meson install -C "$build" --destdir "$work/root" --no-rebuild --quiet >/dev/null ||
  fail "meson install -C $build --destdir $work/root failed"
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
root=$work/root$prefix
libdir=$(dirname "$(find "$root" -name libhora.so -print -quit)")
[ -n "$libdir" ] || fail "no libhora.so under $root"
horarun=$root/bin/horarun
[ -x "$horarun" ] || fail "no installed horarun at $horarun"

readme_example_extract "$src" "$work/example"
# hora.pc says prefix=$prefix; the destdir copy is found by overriding it.
PKG_CONFIG_PATH=$libdir/pkgconfig \
  readme_example_pkgconfig "$work/example" "$work/train_pc" --define-variable=prefix="$root"
hora_dir=$(readme_example_cmake "$work/example" "$work/cmake-build" -DCMAKE_PREFIX_PATH="$root")
[[ $hora_dir == "$root"/* ]] || fail "CMake used the hora package in $hora_dir, not the one in $root"

# A system install's libdir is on the loader's path; the destdir copy's is not.
export LD_LIBRARY_PATH=$libdir
for prog in "$work/train_pc" "$work/cmake-build/train_cmake"; do
  readme_example_run "$horarun" "$prog"
done
echo "cxx_example_test: pkg-config and CMake builds ran at -np 2"
