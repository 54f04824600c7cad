#!/usr/bin/env bash
# The main job: installs, builds, then trains the Fashion-MNIST example with 4 ranks on this host.
#   scripts/demo.sh                 # defaults: 3 epochs, reaches >= 84% test accuracy
#   scripts/demo.sh --epochs 1      # anything after is passed to the example
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh build >/dev/null
exec build/cli/horarun -np 4 -H localhost:4 build/examples/fashion_mnist "$@"
