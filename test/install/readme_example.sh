# Sourced by cxx_example_test.sh (meson install) and pip_install_test.sh (pip install): the README's
# C++ example ("A training program:") built outside this tree against an installed hora, once with
# `pkg-config --cflags --libs hora` and once with CMake's find_package(hora), each binary then run
# under the installed horarun at -np 2. The caller defines fail() and sets the environment a user
# of that install would have (PKG_CONFIG_PATH, PATH, LD_LIBRARY_PATH).

# readme_example_extract SOURCE_DIR DIR: DIR/train.cc is the example exactly as README.md shows it.
readme_example_extract() {
  mkdir -p "$2"
  awk '/^A training program:/{f=1} f&&/^```cpp/{g=1;next} g&&/^```/{exit} g' "$1/README.md" \
    > "$2/train.cc"
  grep -q 'hora::allreduce' "$2/train.cc" || fail "README.md's C++ example not found"
}

# readme_example_pkgconfig DIR OUT [PKG-CONFIG ARGS...]: OUT built from DIR/train.cc with the flags
# of `pkg-config [ARGS...] --cflags --libs hora`.
readme_example_pkgconfig() {
  local dir=$1 out=$2 flags
  shift 2
  flags=$(pkg-config "$@" --cflags --libs hora) || fail "pkg-config $* --cflags --libs hora failed"
  read -r -a flags <<<"$flags"
  c++ -std=c++17 -o "$out" "$dir/train.cc" "${flags[@]}" ||
    fail "the README example did not build with pkg-config (flags: ${flags[*]})"
}

# readme_example_cmake DIR BUILD_DIR [CMAKE ARGS...]: BUILD_DIR/train_cmake built from DIR/train.cc
# by a CMakeLists.txt that says find_package(hora 0.1 REQUIRED) and links hora::hora. Prints the
# hora_DIR CMake found (the folder of horaConfig.cmake).
readme_example_cmake() {
  local dir=$1 build=$2
  shift 2
  cat > "$dir/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(train CXX)
find_package(hora 0.1 REQUIRED)
message(STATUS "hora_DIR=${hora_DIR}")
add_executable(train_cmake train.cc)
target_link_libraries(train_cmake PRIVATE hora::hora)
CMAKE
  cmake -S "$dir" -B "$build" "$@" >"$build.log" 2>&1 ||
    { cat "$build.log" >&2; fail "cmake could not configure the README example (find_package(hora))"; }
  cmake --build "$build" >>"$build.log" 2>&1 ||
    { cat "$build.log" >&2; fail "the README example did not build with CMake"; }
  sed -n 's/^-- hora_DIR=//p' "$build.log"
}

# readme_example_run HORARUN PROGRAM: PROGRAM at -np 2 under HORARUN, both ranks ending well.
readme_example_run() {
  timeout 120 "$1" -np 2 --start-timeout 60 "$2" || fail "$1 -np 2 $2 failed (rc $?)"
}
