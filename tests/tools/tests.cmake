# The tools' shared command-line code (tools/common/: deputy_tool_common,
# not part of deputy_core, which has no CLI11 dependency).
target_link_libraries(tools_tests PRIVATE deputy_tool_common)
# `deputy mpirun`: reading mpirun's arguments, binding the ranks with
# mpirun's options, the rank shim's mapping and its host, command lines
# as text.
target_sources(tools_tests PRIVATE
  ${CMAKE_SOURCE_DIR}/tools/cli/launch/mpirun_args.cc
  ${CMAKE_SOURCE_DIR}/tools/cli/launch/mpi_binding.cc
  ${CMAKE_SOURCE_DIR}/tools/cli/launch/host_list.cc
  ${CMAKE_SOURCE_DIR}/tools/cli/launch/mpirun_helpers.cc
  ${CMAKE_SOURCE_DIR}/tools/cli/launch/spawn.cc)
