# channel_tests also drive the benchmark's session code (mismatched counts,
# a peer killed mid-stream) through the same library the tool links.
target_link_libraries(channel_tests PRIVATE deputy_bench_channel)
