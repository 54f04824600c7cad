#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures build/ if needed, and builds it.
# Usage: scripts/build.sh [BUILD_DIR] [extra meson options...]
set -euo pipefail
cd "$(dirname "$0")/.."
builddir="${1:-build}"
shift || true
bash scripts/setup.sh
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" "$@" >"$builddir.setup.log" 2>&1 || { cat "$builddir.setup.log" >&2; exit 1; }
  rm -f "$builddir.setup.log"
fi
ninja -C "$builddir"
