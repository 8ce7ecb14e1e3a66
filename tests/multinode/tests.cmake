# A member of a team for the host-and-DPU namespace tests (test_dpu_netns.py):
# every collective of the table, this process's part checked against the one
# reference. Not a ctest test of its own: pytest starts one per member inside
# the hosts' namespaces.
add_executable(multinode_table_member ${CMAKE_CURRENT_SOURCE_DIR}/multinode/table_member.cc)
target_link_libraries(multinode_table_member PRIVATE deputy_core GTest::gtest_main)
target_include_directories(multinode_table_member PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
  ${CMAKE_CURRENT_SOURCE_DIR}/agent)
# (The helpers it includes name the deputy binary and the emulator; it starts neither.)
target_compile_definitions(multinode_table_member PRIVATE DEPUTY_TEST_EMULATOR=""
  DEPUTY_BIN="$<TARGET_FILE:deputy_cli>")
