# The PMPI library's correctness tests (docs/pmpi-tests.md), label `mpi`:
# offload_check, an MPI program that includes only <mpi.h>, built once per
# MPI installed, and the runners that compare its output
# with and without libdeputy-mpi-<mpi>.so, plus mpi4py and hpcc. A test
# whose MPI, program or library is missing skips (exit 77) and says which.
# Not in sanitizer builds: LD_PRELOAD of an instrumented library into an
# uninstrumented mpirun job fails before main, and MPI's own allocations
# would drown LeakSanitizer's report; the release step of scripts/test.sh
# runs them.
if(DEPUTY_SANITIZE)
  message(STATUS "DEPUTY_SANITIZE=${DEPUTY_SANITIZE}: the mpi tests (tests/mpi) are not defined")
  return()
endif()
find_package(Python3 COMPONENTS Interpreter)
set(DEPUTY_MPI_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})
set(DEPUTY_MPI_LIB_DIR ${CMAKE_BINARY_DIR}/src/mpi)
if(Python3_Interpreter_FOUND)
  set(DEPUTY_MPI_TEST_PYTHON ${Python3_EXECUTABLE})
else()
  set(DEPUTY_MPI_TEST_PYTHON python3)
endif()

# The MPI flavors are found as for the library (cmake/MpiFlavors.cmake).
foreach(mpi openmpi mpich)
  if(mpi IN_LIST DEPUTY_MPI_FLAVORS)
    add_executable(offload_check_${mpi} ${DEPUTY_MPI_TEST_DIR}/offload_check.c)
    target_link_libraries(offload_check_${mpi} PRIVATE deputy_mpi_api_${mpi} Threads::Threads)
    set_target_properties(offload_check_${mpi} PROPERTIES
      RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/mpi C_STANDARD 11)
    set(prog $<TARGET_FILE:offload_check_${mpi}>)
  else()
    set(prog ${CMAKE_CURRENT_BINARY_DIR}/mpi/offload_check_${mpi}-not-built)
  endif()
  add_test(NAME mpi.offload_check.${mpi}
    COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_offload_check.py --mpi ${mpi}
      --prog ${prog} --deputy $<TARGET_FILE:deputy_cli>
      --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-${mpi}.so)
  # One MPI test at a time: each runs 4 ranks and agents on a small machine.
  # PROCESSORS 2: nothing else of ctest -j2 beside it (timing-bound agent
  # tests flaked next to 4 busy-polling ranks).
  set_tests_properties(mpi.offload_check.${mpi} PROPERTIES LABELS mpi SKIP_RETURN_CODE 77
    TIMEOUT 280 RESOURCE_LOCK deputy_mpi PROCESSORS 2)
endforeach()

# Bad cases (tests/mpi/failure_check.c): an erroneous mismatch and a rank
# killed mid-operation end with clear errors, never a hang.
foreach(mpi openmpi mpich)
  if(mpi IN_LIST DEPUTY_MPI_FLAVORS)
    add_executable(failure_check_${mpi} ${DEPUTY_MPI_TEST_DIR}/failure_check.c)
    target_link_libraries(failure_check_${mpi} PRIVATE deputy_mpi_api_${mpi})
    set_target_properties(failure_check_${mpi} PROPERTIES
      RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/mpi C_STANDARD 11)
    set(prog $<TARGET_FILE:failure_check_${mpi}>)
  else()
    set(prog ${CMAKE_CURRENT_BINARY_DIR}/mpi/failure_check_${mpi}-not-built)
  endif()
  add_test(NAME mpi.failure_check.${mpi}
    COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_failure_check.py --mpi ${mpi}
      --prog ${prog} --deputy $<TARGET_FILE:deputy_cli>
      --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-${mpi}.so)
  set_tests_properties(mpi.failure_check.${mpi} PROPERTIES LABELS mpi SKIP_RETURN_CODE 77
    TIMEOUT 200 RESOURCE_LOCK deputy_mpi PROCESSORS 2)
endforeach()

# mpi4py (Debian's python3-mpi4py) and hpcc (Debian's hpcc): both on Open MPI.
add_test(NAME mpi.mpi4py
  COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_mpi4py_check.py
    --deputy $<TARGET_FILE:deputy_cli> --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-openmpi.so)
add_test(NAME mpi.hpcc
  COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_hpcc_check.py
    --deputy $<TARGET_FILE:deputy_cli> --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-openmpi.so)
set_tests_properties(mpi.mpi4py mpi.hpcc PROPERTIES LABELS mpi SKIP_RETURN_CODE 77 TIMEOUT 200
  RESOURCE_LOCK deputy_mpi PROCESSORS 2)

# The Fortran program and its runner (tests/mpi/fortran.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/fortran.cmake)
