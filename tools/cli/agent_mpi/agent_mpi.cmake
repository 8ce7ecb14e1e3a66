# deputy-agent-mpi: the agent of one node when the agents of several nodes
# form one MPI job (`mpirun ... deputy agent`). Like deputy-bench-coll it is
# its own executable so that `deputy` needs no MPI; `deputy agent` execs it
# when an MPI launcher started it.
# DEPUTY_AGENT_MPI=OFF skips it (the sanitizer build of the test script,
# to keep CI short: tests/agent/nodes_test.cc then skips, saying why).
option(DEPUTY_AGENT_MPI "build deputy-agent-mpi when MPI is found" ON)
if(DEPUTY_AGENT_MPI AND TARGET deputy_mpi_api)
  set(DEPUTY_AGENT_MPI_DIR ${CMAKE_CURRENT_SOURCE_DIR}/cli/agent_mpi)
  add_executable(deputy_agent_mpi
    ${DEPUTY_AGENT_MPI_DIR}/main.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/cli/agent/agent_command.cc
    ${PROJECT_SOURCE_DIR}/src/agent/mpi/mpi_internode.cc
    ${PROJECT_SOURCE_DIR}/src/agent/mpi/mpi_heartbeat.cc
    ${PROJECT_SOURCE_DIR}/src/agent/mpi/mpi_membership.cc
    ${PROJECT_SOURCE_DIR}/src/agent/mpi/mpi_operations.cc
    ${PROJECT_SOURCE_DIR}/src/agent/mpi/mpi_p2p.cc
    ${PROJECT_SOURCE_DIR}/src/coll/transport/mpi/schedule_runner.cc)
  set_target_properties(deputy_agent_mpi PROPERTIES OUTPUT_NAME deputy-agent-mpi)
  target_include_directories(deputy_agent_mpi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(deputy_agent_mpi PRIVATE deputy_core deputy_tool_common
                        deputy_bench_channel CLI11::CLI11 deputy_mpi_api)
  add_dependencies(deputy_cli deputy_agent_mpi)
  install(TARGETS deputy_agent_mpi RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
else()
  message(STATUS "DEPUTY_AGENT_MPI=OFF or MPI not found: deputy-agent-mpi (agents of several "
                 "nodes) is not built")
endif()
