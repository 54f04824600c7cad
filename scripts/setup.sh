#!/usr/bin/env bash
# Installs every Debian package hora's build, tests, examples and benchmarks need (with --demo:
# only those scripts/demo.sh needs).
# Idempotent: runs `apt-get update` only when something is missing, installs only what is missing.
set -euo pipefail

PACKAGES=(
  meson ninja-build pkg-config cmake g++
  libboost-dev libssh2-1-dev libgloo-dev libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  catch2 libssl-dev zlib1g-dev
  dataset-fashion-mnist
  python3-torch libtorch-dev pybind11-dev python3-dev python3-pytest python3-numpy
  # Debian's torch multiplies matrices with the system libblas.so.3: OpenBLAS instead of the
  # reference BLAS makes a Linear layer's step about 4x faster (docs/benchmarks-torch.md).
  libopenblas0-pthread
  openssh-server openssh-client iproute2 procps psmisc
  openmpi-bin libopenmpi-dev
  python3-cloudpickle python3-psutil python3-yaml python3-packaging python3-cffi
  # Horovod's PyTorch examples import torchvision (test/python/test_horovod_examples.py).
  python3-torchvision
  # `pip install .` (pyproject.toml's build backend) and its test in test/install (python3-venv); meson-python runs patchelf on libhora's users.
  python3-mesonpy python3-venv python3-pip patchelf
  # scripts/format.sh (clang-format 14) and scripts/fuzz.sh (clang 14 with libFuzzer and the
  # sanitizer runtimes, which Debian 12 ships in libclang-rt-14-dev).
  clang clang-format libclang-rt-14-dev
  # A real Slurm cluster for the slurm suite (scripts/testslurm.sh runs its own munged,
  # slurmctld and slurmds with their own config, key and sockets under a state dir).
  slurmctld slurmd slurm-client munge
)

# `setup.sh --demo`: only what scripts/demo.sh builds and runs (no tests, Python, MPI or Slurm).
if [ "${1:-}" = --demo ]; then
  PACKAGES=(
    meson ninja-build pkg-config g++
    libboost-dev libssh2-1-dev libgloo-dev libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
    libssl-dev zlib1g-dev dataset-fashion-mnist procps
    # runtime/meson.build writes hora's CMake package files with Meson's cmake module, which runs
    # cmake: without it `meson setup` fails (found on a bare Debian 12 root, CONTRIBUTING.md).
    cmake
  )
fi

missing=()
for p in "${PACKAGES[@]}"; do
  # dpkg-query prints "install ok installed" for a package that is fully installed.
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup.sh: missing packages (${missing[*]}) and not root; run as root or install them" >&2
    exit 1
  fi
fi

echo "setup.sh: installing ${missing[*]}" >&2
# apt-get's own output is silenced below: say that the quiet minutes are the download and install.
echo "setup.sh: apt-get update, then install, quietly (minutes: --demo alone is 140 MB)" >&2
export DEBIAN_FRONTEND=noninteractive
# Packages with a daemon (munge, slurmctld, slurmd, openssh-server) start it from their postinst
# through invoke-rc.d, which asks /usr/sbin/policy-rc.d first. Tests start their own daemons
# (scripts/testhosts.sh, scripts/testslurm.sh); a system munged or sshd started here would only
# linger. Where no policy exists, one that denies every start (exit 101) stands for the install
# and is removed after it. (Without a slurm.conf in /etc/slurm the Slurm init scripts would not
# start anyway, and their systemd units have ConditionPathExists on it.)
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\n# written by hora scripts/setup.sh for one apt-get install\nexit 101\n' |
    $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod 755 "$POLICY"
  trap '$SUDO rm -f "$POLICY"' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
