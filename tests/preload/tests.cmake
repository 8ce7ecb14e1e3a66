# libdeputy-heap.so under an unmodified C program (no deputy header): the
# allocation functions keep malloc's promises with large blocks in the
# shared heap; disabled, nothing lands there and everything still holds.
if(TARGET deputy_heap_preload)
  add_executable(heap_interpose_check ${CMAKE_CURRENT_LIST_DIR}/heap_interpose_check.c)
  target_link_libraries(heap_interpose_check PRIVATE Threads::Threads)
  add_test(NAME preload.heap_interpose
    COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:deputy_heap_preload>
      $<TARGET_FILE:heap_interpose_check>)
  add_test(NAME preload.heap_interpose_disabled
    COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:deputy_heap_preload>
      DEPUTY_HEAP_BYTES=0 $<TARGET_FILE:heap_interpose_check> expect-no-heap)
  add_test(NAME preload.heap_interpose_small_threshold
    COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:deputy_heap_preload>
      DEPUTY_HEAP_MIN_BYTES=4096 $<TARGET_FILE:heap_interpose_check>)
  set_tests_properties(preload.heap_interpose preload.heap_interpose_disabled
    preload.heap_interpose_small_threshold PROPERTIES LABELS preload TIMEOUT 120)
endif()
