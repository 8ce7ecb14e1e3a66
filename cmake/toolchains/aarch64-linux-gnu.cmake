# Cross build for 64-bit Arm Linux (a BlueField's cores, any arm64 host)
# with Debian's cross toolchain (g++-aarch64-linux-gnu) against a sysroot of
# Debian's arm64 packages, as scripts/cross-sysroot.sh makes it.
#   cmake -S . -B build-aarch64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#     -DDEPUTY_SYSROOT=$(scripts/cross-sysroot.sh --path)
# Tests and gtest discovery run the arm64 binaries under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The toolchain file is read again for every try_compile: the sysroot
# travels in the cache and, for those inner projects, in the environment.
if(DEPUTY_SYSROOT)
  set(ENV{DEPUTY_SYSROOT} "${DEPUTY_SYSROOT}")
elseif(DEFINED ENV{DEPUTY_SYSROOT})
  set(DEPUTY_SYSROOT "$ENV{DEPUTY_SYSROOT}")
endif()
if(NOT DEPUTY_SYSROOT OR NOT EXISTS "${DEPUTY_SYSROOT}/usr/include/aarch64-linux-gnu")
  message(FATAL_ERROR "DEPUTY_SYSROOT must name an arm64 Debian sysroot "
    "(scripts/cross-sysroot.sh makes one and prints its path with --path); got '${DEPUTY_SYSROOT}'")
endif()
set(DEPUTY_SYSROOT "${DEPUTY_SYSROOT}" CACHE PATH "arm64 sysroot (scripts/cross-sysroot.sh)")
set(CMAKE_SYSROOT "${DEPUTY_SYSROOT}")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config answers for the sysroot's .pc files, with its paths prefixed.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${DEPUTY_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR}
  "${DEPUTY_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${DEPUTY_SYSROOT}/usr/share/pkgconfig")

# By its full path: the agent tests start the build's programs through it
# too (qemu-user does not follow exec to another arm64 binary).
find_program(DEPUTY_QEMU_AARCH64 qemu-aarch64)
if(DEPUTY_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${DEPUTY_QEMU_AARCH64}" -L "${DEPUTY_SYSROOT}")
else()
  message(WARNING "qemu-aarch64 not found (Debian: qemu-user): the build's tests cannot run here")
endif()
