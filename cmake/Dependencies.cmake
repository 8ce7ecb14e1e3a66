# Every dependency is a Debian 12 package (scripts/deps.sh installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
# libfabric: the remote-memory (rdma) mode of a team proxy, and `deputy bench rail`.
pkg_check_modules(FABRIC REQUIRED IMPORTED_TARGET libfabric)
# The mover's idxd backend finds DSA devices and work queues with it. DSA
# is an Intel x86-64 device and Debian builds libaccel-config for amd64
# only: required there, left out elsewhere (the aarch64 build's backend has
# stand-in queues only; its inventory says why it is empty).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  pkg_check_modules(ACCFG REQUIRED IMPORTED_TARGET libaccel-config)
else()
  pkg_check_modules(ACCFG QUIET IMPORTED_TARGET libaccel-config)
endif()
add_library(deputy_accel_config INTERFACE)
if(ACCFG_FOUND)
  target_link_libraries(deputy_accel_config INTERFACE PkgConfig::ACCFG)
  target_compile_definitions(deputy_accel_config INTERFACE DEPUTY_HAVE_ACCEL_CONFIG=1)
else()
  target_compile_definitions(deputy_accel_config INTERFACE DEPUTY_HAVE_ACCEL_CONFIG=0)
endif()

# spdlog as compiled by Debian (with the system fmt); an interface target so
# the rest of the build names one thing.
add_library(deputy_spdlog INTERFACE)
target_link_libraries(deputy_spdlog INTERFACE spdlog::spdlog)
add_library(deputy::spdlog ALIAS deputy_spdlog)

if(DEPUTY_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
