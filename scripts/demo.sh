#!/usr/bin/env bash
# The main job: installs what it needs, builds what it runs, then trains the Fashion-MNIST example
# with 4 ranks on this host.
#   scripts/demo.sh                 # defaults: 3 epochs, reaches >= 84% test accuracy
#   scripts/demo.sh --epochs 1      # anything after is passed to the example
#
# Only the demo's packages (scripts/setup.sh --demo) and two targets (horarun and the example) in
# build-demo/ (optimized, without tests, NCCL or hora.torch), so a fresh machine reaches the first
# epoch in minutes; scripts/test.sh installs and builds everything else. Each step says what it
# does, and the build shows its progress.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "demo: $*" >&2; }
say "installing the packages the demo needs (scripts/setup.sh --demo; nothing when present)"
bash scripts/setup.sh --demo
if [ ! -f build-demo/build.ninja ]; then
  say "configuring build-demo/ (meson)"
  meson setup build-demo --buildtype=release -Dtests=disabled -Dnccl=disabled -Dtorch=disabled \
    >build-demo.setup.log 2>&1 || { cat build-demo.setup.log >&2; exit 1; }
  rm -f build-demo.setup.log
fi
say "building horarun and the example (ninja, $(nproc) jobs)"
ninja -C build-demo cli/horarun examples/fashion_mnist >&2
say "training: horarun -np 4 -H localhost:4 build-demo/examples/fashion_mnist $*"
exec build-demo/cli/horarun -np 4 -H localhost:4 build-demo/examples/fashion_mnist "$@"
