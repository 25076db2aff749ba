# CMake toolchain file: cross-build salamander for arm64 (aarch64) Debian 12 with
# Debian's cross compilers (g++-aarch64-linux-gnu) against a sysroot holding the
# arm64 builds of the dependencies. deploy/check-arm64.sh makes the sysroot and
# uses this file; by hand:
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DSALAMANDER_ARM64_SYSROOT=/var/cache/salamander/arm64-sysroot
#
# The sysroot defaults to $SALAMANDER_ARM64_ROOT, then
# /var/cache/salamander/arm64-sysroot. It must be an unpacked arm64 Debian 12
# root with relative symlinks (see deploy/check-arm64.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT SALAMANDER_ARM64_SYSROOT)
  if(DEFINED ENV{SALAMANDER_ARM64_ROOT} AND NOT "$ENV{SALAMANDER_ARM64_ROOT}" STREQUAL "")
    set(SALAMANDER_ARM64_SYSROOT "$ENV{SALAMANDER_ARM64_ROOT}")
  else()
    set(SALAMANDER_ARM64_SYSROOT /var/cache/salamander/arm64-sysroot)
  endif()
endif()
if(NOT EXISTS "${SALAMANDER_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu")
  message(FATAL_ERROR "arm64 sysroot not found at ${SALAMANDER_ARM64_SYSROOT} "
                      "(make it with deploy/check-arm64.sh, or set SALAMANDER_ARM64_SYSROOT)")
endif()
# try_compile projects see the same sysroot
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SALAMANDER_ARM64_SYSROOT)

set(CMAKE_SYSROOT "${SALAMANDER_ARM64_SYSROOT}")
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Headers, libraries and package configs come from the sysroot only (their
# absolute paths, e.g. /usr/lib/aarch64-linux-gnu/..., are re-rooted into it);
# programs (capnp, ccache, pkg-config) from the host.
set(CMAKE_FIND_ROOT_PATH "${CMAKE_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The schema compiler runs at build time: the host's (amd64) capnp, which must be
# the same version as the sysroot's libcapnp (both 0.9.2 in bookworm).
set(CAPNP_EXECUTABLE /usr/bin/capnp CACHE FILEPATH "host capnp (schema compiler)")
set(CAPNPC_CXX_EXECUTABLE /usr/bin/capnpc-c++ CACHE FILEPATH "host capnpc-c++ plugin")

# pkg-config (cpp-httplib, Cap'n Proto's config) reads the sysroot's .pc files.
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_LIBDIR}
    "${CMAKE_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${CMAKE_SYSROOT}/usr/lib/pkgconfig:${CMAKE_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${CMAKE_SYSROOT}")

# Test executables (catch_discover_tests lists their test cases after linking;
# ctest) run under qemu-user with the sysroot's loader and libraries.
find_program(SALAMANDER_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(SALAMANDER_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${SALAMANDER_QEMU_AARCH64};-L;${CMAKE_SYSROOT}")
endif()
