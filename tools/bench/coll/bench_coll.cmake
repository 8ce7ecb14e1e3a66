# `deputy bench coll`: collectives through the agent against MPI's own.
#
# It is an MPI program, but the `deputy` binary must not link MPI (users run
# it without any). So the benchmark is its own executable,
# deputy-bench-coll, built beside `deputy` when CMake finds MPI, and
# `deputy bench coll ...` execs it (launcher.cc) with the same arguments:
#   mpirun -np 2 build/tools/deputy bench coll --op iallreduce
set(DEPUTY_BENCH_COLL_DIR ${CMAKE_CURRENT_SOURCE_DIR}/bench/coll)
target_sources(deputy_cli PRIVATE ${DEPUTY_BENCH_COLL_DIR}/launcher.cc)

# DEPUTY_BENCH_COLL=OFF skips it (the sanitizer builds of the test script:
# no ctest case runs it, and it is the slowest part to compile).
option(DEPUTY_BENCH_COLL "build deputy-bench-coll when MPI is found" ON)
if(DEPUTY_BENCH_COLL AND TARGET deputy_mpi_api)
  file(GLOB DEPUTY_BENCH_COLL_SOURCES CONFIGURE_DEPENDS ${DEPUTY_BENCH_COLL_DIR}/*.cc)
  list(REMOVE_ITEM DEPUTY_BENCH_COLL_SOURCES ${DEPUTY_BENCH_COLL_DIR}/launcher.cc)
  add_executable(deputy_bench_coll ${DEPUTY_BENCH_COLL_SOURCES}
    ${PROJECT_SOURCE_DIR}/src/coll/transport/mpi/schedule_runner.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/bench/common/sleep_cost.c)
  set_target_properties(deputy_bench_coll PROPERTIES OUTPUT_NAME deputy-bench-coll)
  target_include_directories(deputy_bench_coll PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(deputy_bench_coll PRIVATE deputy_core deputy_tool_common CLI11::CLI11
    deputy_mpi_api)
  add_dependencies(deputy_cli deputy_bench_coll)
  # Installed beside deputy, where `deputy bench coll` looks for it.
  install(TARGETS deputy_bench_coll RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
else()
  message(STATUS "DEPUTY_BENCH_COLL=OFF or MPI not found: deputy-bench-coll (deputy bench coll) is not built; "
                 "Debian: apt-get install openmpi-bin libopenmpi-dev")
endif()
