# `deputy bench rail` needs libfabric (Debian: libfabric-dev; found in
# cmake/Dependencies.cmake, its objects in src/fabric). The rail sources
# other than the CLI entry form a static library so tests/rail can link the
# same code the tool runs.

file(GLOB DEPUTY_RAIL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/bench/rail/*.cc)
list(REMOVE_ITEM DEPUTY_RAIL_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench/rail/bench_rail.cc)

add_library(deputy_rail STATIC ${DEPUTY_RAIL_SOURCES})
target_include_directories(deputy_rail PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(deputy_rail PUBLIC deputy_core deputy_tool_common PkgConfig::FABRIC)

# deputy_cli globbed bench/*/*.cc; compile those files once, in deputy_rail.
get_target_property(DEPUTY_CLI_SOURCES deputy_cli SOURCES)
list(REMOVE_ITEM DEPUTY_CLI_SOURCES ${DEPUTY_RAIL_SOURCES})
set_property(TARGET deputy_cli PROPERTY SOURCES ${DEPUTY_CLI_SOURCES})
target_link_libraries(deputy_cli PRIVATE deputy_rail PkgConfig::FABRIC)
