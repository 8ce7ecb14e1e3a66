# deputy-bench-mpi-<flavor>: the OSU-method benchmark of libdeputy-mpi, an
# MPI program that includes only <mpi.h> (tools/bench/mpi/osu_overlap.c),
# one per MPI flavor (cmake/MpiFlavors.cmake).
foreach(flavor ${DEPUTY_MPI_FLAVORS})
  add_executable(deputy_bench_mpi_${flavor} ${CMAKE_CURRENT_LIST_DIR}/osu_overlap.c
    ${CMAKE_CURRENT_LIST_DIR}/../common/sleep_cost.c)
  target_include_directories(deputy_bench_mpi_${flavor} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../..)
  set_target_properties(deputy_bench_mpi_${flavor} PROPERTIES
    OUTPUT_NAME deputy-bench-mpi-${flavor} RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
  target_link_libraries(deputy_bench_mpi_${flavor} PRIVATE deputy_mpi_api_${flavor})
  install(TARGETS deputy_bench_mpi_${flavor} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()
