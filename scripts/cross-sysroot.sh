#!/usr/bin/env bash
# Makes the arm64 sysroot the aarch64 cross build compiles and links against
# (cmake/toolchains/aarch64-linux-gnu.cmake): Debian 12's arm64 builds of
# deputy's dependencies, unpacked by mmdebstrap (no arm64 code runs). Kept
# outside the clone, as ccache's cache is, in
#   ${DEPUTY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/deputy}/sysroot-arm64-<key>
# where <key> changes with the package list, so a new list makes a new one.
# Prints the sysroot's path (the only line on stdout); reuses it when there.
# Usage: scripts/cross-sysroot.sh [--dry-run]   (--dry-run: the path only)
# Needs root, or unprivileged user namespaces (mmdebstrap --mode=unshare),
# and Debian's mirror (deb.debian.org, or DEPUTY_DEBIAN_MIRROR).
set -euo pipefail

suite=bookworm
mirror=${DEPUTY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What the cross build needs: the C library and libstdc++ of the target,
# deputy's build dependencies (scripts/deps.sh) and GoogleTest. Not
# libaccel-config (Debian builds it for amd64 only), not the examples'
# FFTW and BLAS (the cross build leaves examples/ out).
packages=(
  libc6-dev libstdc++-12-dev
  libhwloc-dev libisal-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libfabric-dev libsodium-dev libopenmpi-dev
  libgtest-dev libgmock-dev
)

cache=${DEPUTY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deputy}
key=$(printf '%s\n' "$suite" "${packages[@]}" | sha256sum | cut -c1-12)
sysroot=$cache/sysroot-arm64-$key

if [[ ${1:-} == --dry-run ]]; then
  echo "$sysroot"
  exit 0
fi
if [[ -f $sysroot/.complete ]]; then
  echo "$sysroot"
  exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
  echo "cross-sysroot: mmdebstrap is missing: sudo apt-get install -y mmdebstrap" \
       "(or bash scripts/deps.sh test as root)" >&2
  exit 1
fi

mkdir -p "$cache"
# Made beside its final place and renamed when complete: an interrupted run
# leaves no half sysroot that a later one would take for whole.
partial=$(mktemp -d "$cache/.sysroot-arm64-$key.XXXXXX")
trap 'rm -rf "$partial"' EXIT
mode=root
[[ $(id -u) -eq 0 ]] || mode=unshare
echo "cross-sysroot: making $sysroot (mmdebstrap, $mode mode, ${#packages[@]} packages and" \
     "their dependencies from $mirror)" >&2
start=$SECONDS
# --variant=extract unpacks the packages and their dependencies without
# running any of their scripts: nothing of arm64 needs to execute.
if ! mmdebstrap --quiet --arch=arm64 --variant=extract --mode="$mode" \
      --include="$(IFS=,; echo "${packages[*]}")" "$suite" "$partial" "$mirror" >&2; then
  echo "cross-sysroot: mmdebstrap failed (see above)" >&2
  exit 1
fi
touch "$partial/.complete"
rm -rf "$sysroot"
mv "$partial" "$sysroot"
trap - EXIT
echo "cross-sysroot: made in $((SECONDS - start)) s ($(du -sh "$sysroot" | cut -f1))" >&2
echo "$sysroot"
