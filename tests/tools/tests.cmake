# The tools' shared command-line code is not part of deputy_core (the library
# has no CLI11 dependency), so its test compiles the sources it exercises.
target_sources(tools_tests PRIVATE
  ${CMAKE_SOURCE_DIR}/tools/common/cli_json.cc
  ${CMAKE_SOURCE_DIR}/tools/common/cli_common.cc)
target_link_libraries(tools_tests PRIVATE CLI11::CLI11)
# `deputy mpirun`: reading mpirun's arguments, binding the ranks with
# mpirun's options, the rank shim's mapping, command lines as text.
target_sources(tools_tests PRIVATE
  ${CMAKE_SOURCE_DIR}/tools/launch/mpirun_args.cc
  ${CMAKE_SOURCE_DIR}/tools/launch/mpi_binding.cc
  ${CMAKE_SOURCE_DIR}/tools/launch/mpirun_helpers.cc
  ${CMAKE_SOURCE_DIR}/tools/launch/spawn.cc)
