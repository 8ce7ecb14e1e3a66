#!/usr/bin/env bash
# Checks the Debian 12 packages deputy needs and installs the missing ones
# when run as root; otherwise prints the exact apt-get line and fails.
# Usage: scripts/deps.sh [build|test|cross|--fuzz]   (test adds what only the
# tests need, the aarch64 cross build's tools included; cross adds only
# those; --fuzz adds clang and libFuzzer for scripts/fuzz.sh)
set -euo pipefail

build_packages=(
  g++ make cmake ninja-build pkg-config ccache
  libhwloc-dev libisal-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libfabric-dev libfabric-bin libsodium-dev openmpi-bin libopenmpi-dev
  # examples/: the FFT's 1-D transforms and the LU's BLAS
  libfftw3-dev libopenblas-dev
)
# The mover's DSA (idxd) backend reads devices and work queues with
# libaccel-config: DSA is an Intel x86-64 device and Debian builds the
# library for amd64 only (an arm64 build goes without: docs/arm.md).
if [[ $(dpkg --print-architecture) == amd64 ]]; then
  build_packages+=(libaccel-config-dev)
fi
test_packages=(
  libgtest-dev libgmock-dev
  python3 python3-venv python3-pip python3-matplotlib python3-rich python3-pytest python3-yaml
  python3-pytest-xdist
  iproute2
  # tests/mpi: offload_check for the second MPI, Fortran programs against both,
  # and unmodified MPI applications (docs/pmpi-tests.md)
  mpich libmpich-dev gfortran hpcc python3-mpi4py python3-numpy
  # the Python package's tests on torch CPU tensors (Debian's PyTorch: PyPI's
  # Linux wheel is a multi-gigabyte CUDA build)
  python3-torch
)
# The aarch64 cross build (docs/arm.md): Debian's cross compiler, qemu-user
# to run its tests, and mmdebstrap to make its arm64 sysroot
# (scripts/cross-sysroot.sh).
# An amd64 host's: on another, scripts/test.sh skips that step.
cross_packages=()
if [[ $(dpkg --print-architecture) == amd64 ]]; then
  cross_packages=(g++-aarch64-linux-gnu qemu-user mmdebstrap)
fi
# The fuzz step of scripts/test.sh (libFuzzer lives in libclang-rt-14-dev).
# Optional for `test`: installed when root, only suggested otherwise, since
# test.sh skips the step without clang.
fuzz_packages=(clang libclang-rt-14-dev)

packages=("${build_packages[@]}")
optional=()
case "${1:-build}" in
  test) packages+=("${test_packages[@]}" "${cross_packages[@]}"); optional=("${fuzz_packages[@]}") ;;
  cross) packages+=("${cross_packages[@]}") ;;
  fuzz|--fuzz) packages+=("${fuzz_packages[@]}") ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
for p in "${optional[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    if [[ $(id -u) -eq 0 ]]; then
      missing+=("$p")
    else
      echo "deps: optional, for the fuzz step of scripts/test.sh: sudo apt-get install -y $p" >&2
    fi
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
else
  echo "deps: missing Debian packages. Run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
