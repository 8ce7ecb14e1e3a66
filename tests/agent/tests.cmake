# agent_tests run the built `deputy agent` as a separate process (the
# realistic set-up: liveness, cleanup and fd counts need a real process).
target_compile_definitions(agent_tests PRIVATE DEPUTY_BIN="$<TARGET_FILE:deputy_cli>")
add_dependencies(agent_tests deputy_cli)
