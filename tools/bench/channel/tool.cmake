# `deputy bench channel`: everything but the CLI entry forms a static library
# so tests/channel can drive the same session code the tool runs.
set(DEPUTY_BENCH_CHANNEL_DIR ${CMAKE_CURRENT_SOURCE_DIR}/bench/channel)
file(GLOB DEPUTY_BENCH_CHANNEL_SOURCES CONFIGURE_DEPENDS ${DEPUTY_BENCH_CHANNEL_DIR}/*.cc)
list(REMOVE_ITEM DEPUTY_BENCH_CHANNEL_SOURCES ${DEPUTY_BENCH_CHANNEL_DIR}/bench_channel.cc)

add_library(deputy_bench_channel STATIC ${DEPUTY_BENCH_CHANNEL_SOURCES})
target_include_directories(deputy_bench_channel PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(deputy_bench_channel PUBLIC deputy_core deputy_tool_common)

# deputy_cli globbed bench/*/*.cc; compile those files once, here.
get_target_property(DEPUTY_CLI_SOURCES deputy_cli SOURCES)
list(REMOVE_ITEM DEPUTY_CLI_SOURCES ${DEPUTY_BENCH_CHANNEL_SOURCES})
set_property(TARGET deputy_cli PROPERTY SOURCES ${DEPUTY_CLI_SOURCES})
target_link_libraries(deputy_cli PRIVATE deputy_bench_channel)
