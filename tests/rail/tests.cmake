# rail_tests links the rail library (the code the tool runs) and runs the
# built `deputy` binary as a subprocess for the end-to-end cases.
target_link_libraries(rail_tests PRIVATE deputy_rail)
target_compile_definitions(rail_tests PRIVATE DEPUTY_BIN="$<TARGET_FILE:deputy_cli>")
add_dependencies(rail_tests deputy_cli)
target_compile_definitions(rail_tests PRIVATE
                           DEPUTY_RAIL_TOPOLOGIES="${CMAKE_CURRENT_LIST_DIR}/topologies")
