# libdeputy-heap.so: preload it (LD_PRELOAD) into a program that is not MPI
# to put its large allocations in deputy's shared heap (include/deputy/heap.h),
# which the agent reaches in place. libdeputy-mpi compiles the same file in.
# Not in a sanitizer build: ASan and TSan replace malloc themselves.
set(DEPUTY_HEAP_INTERPOSE_SOURCE ${CMAKE_CURRENT_LIST_DIR}/heap_interpose.cc)
if(DEPUTY_SANITIZE)
  return()
endif()
add_library(deputy_heap_preload SHARED ${DEPUTY_HEAP_INTERPOSE_SOURCE})
set_target_properties(deputy_heap_preload PROPERTIES OUTPUT_NAME deputy-heap
  INSTALL_RPATH "$ORIGIN" CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/src/preload)
target_link_libraries(deputy_heap_preload PRIVATE deputy ${CMAKE_DL_LIBS})
target_link_options(deputy_heap_preload PRIVATE -Wl,--no-undefined)
install(TARGETS deputy_heap_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
