#!/usr/bin/env bash
# The README's C++ example ("A training program:") built outside this tree against an installed
# hora, once with `pkg-config --cflags --libs hora` and once with CMake's find_package(hora), then
# run under the installed horarun at -np 2. The install is `meson install --destdir` of the
# existing build dir (no rebuild): about 20 s on 2 cores, most of it CMake's configure.
# Usage: cxx_example_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d /tmp/hora-install-cxx.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "cxx_example_test: $*" >&2; exit 1; }

meson install -C "$build" --destdir "$work/root" --no-rebuild --quiet >/dev/null ||
  fail "meson install -C $build --destdir $work/root failed"
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
root=$work/root$prefix
libdir=$(dirname "$(find "$root" -name libhora.so -print -quit)")
[ -n "$libdir" ] || fail "no libhora.so under $root"
horarun=$root/bin/horarun
[ -x "$horarun" ] || fail "no installed horarun at $horarun"

# The example, exactly as README.md shows it.
mkdir -p "$work/example"
awk '/^A training program:/{f=1} f&&/^```cpp/{g=1;next} g&&/^```/{exit} g' "$src/README.md" \
  > "$work/example/train.cc"
grep -q 'hora::allreduce' "$work/example/train.cc" || fail "README.md's C++ example not found"

# pkg-config: hora.pc says prefix=$prefix; point it at the destdir copy.
export PKG_CONFIG_PATH=$libdir/pkgconfig
read -r -a flags <<<"$(pkg-config --define-variable=prefix="$root" --cflags --libs hora)"
c++ -std=c++17 -o "$work/train_pc" "$work/example/train.cc" "${flags[@]}" ||
  fail "the README example did not build with pkg-config (flags: ${flags[*]})"

# CMake: find_package(hora) through CMAKE_PREFIX_PATH, linking the imported target hora::hora.
cat > "$work/example/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(train CXX)
find_package(hora 0.1 REQUIRED)
add_executable(train_cmake train.cc)
target_link_libraries(train_cmake PRIVATE hora::hora)
CMAKE
cmake -S "$work/example" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$root" >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; fail "cmake could not configure the README example (find_package(hora))"; }
cmake --build "$work/cmake-build" >>"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; fail "the README example did not build with CMake"; }

export LD_LIBRARY_PATH=$libdir
for prog in "$work/train_pc" "$work/cmake-build/train_cmake"; do
  timeout 120 "$horarun" -np 2 --start-timeout 60 "$prog" ||
    fail "$horarun -np 2 $prog failed (rc $?)"
done
echo "cxx_example_test: pkg-config and CMake builds ran at -np 2"
