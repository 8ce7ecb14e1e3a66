# agent_tests run the built `deputy agent` as a separate process (the
# realistic set-up: liveness, cleanup and fd counts need a real process).
target_compile_definitions(agent_tests PRIVATE DEPUTY_BIN="$<TARGET_FILE:deputy_cli>")
add_dependencies(agent_tests deputy_cli)

# The attacker of the hostile-client suite (hostile_test.cc): its own
# process, as a hostile client of the agent's user would be.
add_executable(hostile_client ${CMAKE_CURRENT_LIST_DIR}/hostile_client.cc)
target_link_libraries(hostile_client PRIVATE deputy_core)
target_compile_definitions(agent_tests PRIVATE HOSTILE_CLIENT_BIN="$<TARGET_FILE:hostile_client>")
add_dependencies(agent_tests hostile_client)
