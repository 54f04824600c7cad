#!/usr/bin/env bash
# Makes (idempotently) one of the project's Python virtual environments from PyPI and prints its
# path. Usage: scripts/venv.sh NAME   (NAME: a file scripts/venvs/NAME.txt of pinned requirements)
#
# The venvs live outside the clone, in ${HORA_VENV_ROOT:-$HOME/.cache/hora/venvs}/NAME-<hash of
# the requirements file>, so that every clone on a machine (CI's fresh clone too) shares one
# install, and a changed pin makes a new venv instead of mutating an old one. `.venv-NAME` in the
# clone is a symlink to it, for people. Nothing is ever pip-installed into the system Python.
# Sizes and install times: CONTRIBUTING.md ("Framework venvs").
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:?usage: scripts/venv.sh NAME (tf, engines)}"
req="scripts/venvs/$name.txt"
[ -f "$req" ] || { echo "venv.sh: no $req" >&2; exit 2; }
hash=$(sha256sum "$req" | cut -c1-12)
root="${HORA_VENV_ROOT:-$HOME/.cache/hora/venvs}"
dir="$root/$name-$hash"
if [ ! -f "$dir/.complete" ]; then
  # A half-made venv (an interrupted install) is made again from scratch.
  rm -rf "$dir"
  mkdir -p "$root"
  flags=()
  if grep -q '^# venv: --system-site-packages' "$req"; then flags+=(--system-site-packages); fi
  echo "venv.sh: making $dir from $req (pip, quietly; minutes: CONTRIBUTING.md 'Framework venvs')" >&2
  start=$(date +%s)
  /usr/bin/python3 -m venv "${flags[@]}" "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  touch "$dir/.complete"
  echo "venv.sh: $name ready in $(( $(date +%s) - start )) s, $(du -sh "$dir" | cut -f1)" >&2
fi
ln -sfn "$dir" ".venv-$name"
echo "$dir"
