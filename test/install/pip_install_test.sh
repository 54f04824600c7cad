#!/usr/bin/env bash
# `pip install --no-build-isolation .` of a copy of the source tree into a fresh venv made with
# Debian's python3 (--system-site-packages, for Debian's torch), then, on that one install (the
# build is most of this test's ~8 min on 2 cores):
#   1. meson-python mapped every file meson installs into the wheel (it drops the others);
#   2. the build left in the source tree only files .gitignore ignores;
#   3. the venv's horarun runs hora.torch's allreduce at -np 2 with the venv's python;
#   4. the C++ headers are in venv/include/hora, and nothing but headers;
#   5. hora.pc holds no absolute path (it must not name the build machine's prefix or CUDA) and
#      its prefix is the venv;
#   6. with the venv activated, the README's C++ example builds with pkg-config
#      (PKG_CONFIG_PATH=$VIRTUAL_ENV/lib/pkgconfig, as docs/install.md says) and with CMake's
#      find_package(hora) (nothing set), both from the venv's files, and each runs at -np 2 under
#      the venv's horarun without LD_LIBRARY_PATH (readme_example.sh);
#   7. `pip uninstall hora` leaves the venv exactly as it was before the install.
# One build is too slow to learn one defect at a time: every check runs and the test fails at the
# end with all the defects found (`defect`); only a check that later ones depend on stops it.
# Usage: pip_install_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d /tmp/hora-install-pip.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "pip_install_test: $*" >&2; exit 1; }
defects=()
defect() { echo "pip_install_test: $*" >&2; defects+=("$*"); }
source "$(dirname "$0")/readme_example.sh"
# A user's shell: none of the search paths a developer's shell may carry.
unset PKG_CONFIG_PATH CMAKE_PREFIX_PATH LD_LIBRARY_PATH LIBRARY_PATH CPATH PYTHONPATH VIRTUAL_ENV

mkdir "$work/src"
# Tracked and untracked-but-not-ignored files: no build dirs.
git -C "$src" ls-files -co --exclude-standard -z | (cd "$src" && tar --null -T - -cf -) |
  tar -xf - -C "$work/src"
(cd "$work/src" && find . | sort) >"$work/src.before"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
(cd "$work/venv" && find . | sort) >"$work/venv.before"

# -O0 here: this test is about what gets installed where, and -O0 halves the compile time.
(cd "$work/src" && timeout 1500 "$work/venv/bin/pip" install -v --no-build-isolation --no-index \
  --config-settings=setup-args=-Doptimization=0 . >"$work/pip.log" 2>&1) ||
  { tail -40 "$work/pip.log" >&2; fail "pip install failed"; }

# 1. The wheel holds everything meson installs.
if grep -E 'could not be mapped|Using heuristics' "$work/pip.log" >&2; then
  defect "meson-python could not place these files in the wheel (above); it leaves them out"
fi

# 2. The source tree stays clean.
(cd "$work/src" && find . | sort) >"$work/src.after"
while read -r path; do
  git -C "$src" check-ignore -q --no-index -- "${path#./}" ||
    defect "the pip build left ${path#./} in the source tree and .gitignore does not ignore it"
done < <(comm -13 "$work/src.before" "$work/src.after")

# What `source venv/bin/activate` gives a user (its prompt code reads unset variables).
set +u
source "$work/venv/bin/activate"
set -u
venv=$VIRTUAL_ENV
[ "$(command -v horarun)" = "$venv/bin/horarun" ] || fail "pip did not install horarun into $venv/bin"

# 3. hora.torch under the venv's horarun.
if out=$(cd "$work" && timeout 180 horarun -np 2 --start-timeout 120 python -c '
import hora.torch as hvd, torch, sys
assert hvd.__file__.startswith(sys.prefix), hvd.__file__
hvd.init()
t = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print("RESULT", hvd.rank(), t.item())
'); then
  echo "$out"
  [ "$(grep -c 'RESULT [01] 3.0' <<<"$out")" = 2 ] || defect "expected both ranks to print 3.0: $out"
else
  defect "horarun -np 2 python (hora.torch allreduce) failed: $out"
fi

# 4. Headers: every public header and the generated version.h, nothing else.
expected=$( (cd "$src/runtime/include/hora" && ls -- *.h; echo version.h) | sort)
if [ -d "$venv/include/hora" ]; then
  installed=$(cd "$venv/include/hora" && find . -mindepth 1 | sed 's|^\./||' | sort)
  [ "$installed" = "$expected" ] ||
    defect "$venv/include/hora holds [$(echo $installed)], not the public headers [$(echo $expected)]"
else
  defect "no $venv/include/hora; hora.h installed at: $(cd "$venv" && find . -name hora.h | tr '\n' ' ')"
fi

# 5. hora.pc: where docs/install.md says, and no hora.pc anywhere in the venv names an absolute
# path (the build's prefix /usr, the build machine's Gloo and CUDA in Libs.private).
pc=$venv/lib/pkgconfig/hora.pc
export PKG_CONFIG_PATH=$venv/lib/pkgconfig
while read -r f; do
  if grep -nvE '^[[:space:]]*#' "$f" | grep -E '(^[0-9]+:|[=[:space:]])/' >&2; then
    defect "$f names absolute paths (above): it must find everything relative to itself"
  fi
done < <(find "$venv" -name hora.pc)
if [ -f "$pc" ]; then
  pc_prefix=$(pkg-config --variable=prefix hora) || pc_prefix=
  [ "$(realpath -m "$pc_prefix")" = "$(realpath "$venv")" ] ||
    defect "hora.pc's prefix is $pc_prefix, not the venv $venv"
else
  defect "no hora.pc at $pc:" "$(cd "$venv" && find . -name 'hora.pc' | tr '\n' ' ')"
fi

# 6. The README's C++ example, both ways (each in a subshell: its fail() ends only that check).
readme_example_extract "$src" "$work/example"
(readme_example_pkgconfig "$work/example" "$work/train_pc" &&
  readme_example_run horarun "$work/train_pc") ||
  defect "the README example with pkg-config (PKG_CONFIG_PATH=$PKG_CONFIG_PATH) failed (above)"
(hora_dir=$(readme_example_cmake "$work/example" "$work/cmake-build") &&
  { [[ $(realpath "$hora_dir") == "$(realpath "$venv")"/* ]] ||
      fail "CMake found hora in ${hora_dir:-nowhere}, not in the venv $venv"; } &&
  readme_example_run horarun "$work/cmake-build/train_cmake") ||
  defect "the README example with CMake's find_package(hora) (nothing set) failed (above)"

# 7. Uninstall.
pip uninstall -y -q hora || fail "pip uninstall hora failed"
(cd "$venv" && find . | sort) >"$work/venv.after"
diff "$work/venv.before" "$work/venv.after" >&2 ||
  defect "pip uninstall hora left the venv different from before the install (above: > left behind)"

if [ ${#defects[@]} -gt 0 ]; then
  printf 'pip_install_test: FAILED, %d defect(s):\n' ${#defects[@]} >&2
  printf '  - %s\n' "${defects[@]}" >&2
  exit 1
fi
echo "pip_install_test: installed, ran hora.torch and the README's C++ example (pkg-config, CMake) at -np 2, uninstalled cleanly"
