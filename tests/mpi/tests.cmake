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

# A C program of tests/mpi built once per MPI flavor (found as for the
# library, cmake/MpiFlavors.cmake) and its runner run_<name>.py, as test
# mpi.<name>.<mpi>: one MPI test at a time (each runs several ranks and
# agents on a small machine), RUN_SERIAL: nothing else of ctest beside it,
# whatever its -j (timing-bound agent tests flaked next to 4 busy-polling
# ranks). An MPI
# that is not installed gives a program path that does not exist: the
# runner skips, naming it.
function(deputy_mpi_program_test name timeout)
  foreach(mpi openmpi mpich)
    if(mpi IN_LIST DEPUTY_MPI_FLAVORS)
      add_executable(${name}_${mpi} ${DEPUTY_MPI_TEST_DIR}/${name}.c)
      target_link_libraries(${name}_${mpi} PRIVATE deputy_mpi_api_${mpi} Threads::Threads)
      set_target_properties(${name}_${mpi} PROPERTIES
        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/mpi C_STANDARD 11)
      set(prog $<TARGET_FILE:${name}_${mpi}>)
    else()
      set(prog ${CMAKE_CURRENT_BINARY_DIR}/mpi/${name}_${mpi}-not-built)
    endif()
    add_test(NAME mpi.${name}.${mpi}
      COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_${name}.py --mpi ${mpi}
        --prog ${prog} --deputy $<TARGET_FILE:deputy_cli>
        --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-${mpi}.so)
    set_tests_properties(mpi.${name}.${mpi} PROPERTIES LABELS mpi SKIP_RETURN_CODE 77
      TIMEOUT ${timeout} RUN_SERIAL TRUE)
  endforeach()
endfunction()

# offload_check: every offloaded operation, with and without the library.
deputy_mpi_program_test(offload_check 280)
# A communicator of 100 ranks and its splits (large_comm_check.c): teams
# above 64 members, every collective offloaded on every rank.
deputy_mpi_program_test(large_comm_check 280)
# Bad cases (failure_check.c): an erroneous mismatch and a rank killed
# mid-operation end with clear errors, never a hang.
deputy_mpi_program_test(failure_check 200)

# mpi4py (Debian's python3-mpi4py) and hpcc (Debian's hpcc): both on Open MPI.
add_test(NAME mpi.mpi4py
  COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_mpi4py_check.py
    --deputy $<TARGET_FILE:deputy_cli> --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-openmpi.so)
add_test(NAME mpi.hpcc
  COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_hpcc_check.py
    --deputy $<TARGET_FILE:deputy_cli> --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-openmpi.so)
set_tests_properties(mpi.mpi4py mpi.hpcc PROPERTIES LABELS mpi SKIP_RETURN_CODE 77 TIMEOUT 200
  RUN_SERIAL TRUE)

# The Fortran program and its runner (tests/mpi/fortran.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/fortran.cmake)

# Point-to-point through deputy (deputy mpirun --p2p): p2p_check, a plain
# MPI program of point-to-point calls, gives the same result lines as under
# the MPI's own launcher on 1-4 ranks, and every rank offloaded each call
# (tests/apps/run_app_check.py; the probes, which even and odd ranks make
# differently, are in the reports but not required of every rank; one rank
# sends nothing blocking but to MPI_PROC_NULL, which MPI handles; the
# persistent requests count their starts); 4 ranks on 2 simulated nodes
# (messages between agents, MPI_ANY_SOURCE across them); and 2 ranks whose
# agent is reached over TCP with a key (an agent on another host).
set(DEPUTY_P2P_PERSISTENT_OPS "MPI_Send_init,MPI_Recv_init,MPI_Ssend_init")
set(DEPUTY_P2P_OPS
  "MPI_Isend,MPI_Irecv,MPI_Send,MPI_Recv,MPI_Sendrecv,MPI_Sendrecv_replace,MPI_Issend,MPI_Ssend,${DEPUTY_P2P_PERSISTENT_OPS}")
foreach(mpi ${DEPUTY_MPI_FLAVORS})
  add_executable(p2p_check_${mpi} ${DEPUTY_MPI_TEST_DIR}/p2p_check.c)
  target_link_libraries(p2p_check_${mpi} PRIVATE deputy_mpi_api_${mpi})
  set_target_properties(p2p_check_${mpi} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/mpi C_STANDARD 11)
  add_test(NAME mpi.p2p_check.${mpi}
    COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/../apps/run_app_check.py --p2p
      --mpi ${mpi} --prog $<TARGET_FILE:p2p_check_${mpi}> --deputy $<TARGET_FILE:deputy_cli>
      --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-${mpi}.so
      --case "1||MPI_Isend,MPI_Irecv,MPI_Recv,MPI_Sendrecv,MPI_Sendrecv_replace,MPI_Ssend,${DEPUTY_P2P_PERSISTENT_OPS}"
      --case "2||${DEPUTY_P2P_OPS}"
      --case "3||${DEPUTY_P2P_OPS}" --case "4||${DEPUTY_P2P_OPS}"
      --case "4||${DEPUTY_P2P_OPS}|2"
      --remote-case "2||${DEPUTY_P2P_OPS}")
  set_tests_properties(mpi.p2p_check.${mpi} PROPERTIES LABELS mpi SKIP_RETURN_CODE 77
    TIMEOUT 280 RUN_SERIAL TRUE)
endforeach()

# OSU Micro-Benchmarks' point-to-point binaries, unmodified, with their
# validation (-c), under `deputy mpirun --p2p` (Open MPI): built once from
# DEPUTY_OSU_SOURCE (its tarball or tree) into the build tree; skipped,
# saying so, when that is unset (tests/mpi/run_osu_p2p_check.py).
if(openmpi IN_LIST DEPUTY_MPI_FLAVORS)
  add_test(NAME mpi.osu_p2p.openmpi
    COMMAND ${DEPUTY_MPI_TEST_PYTHON} ${DEPUTY_MPI_TEST_DIR}/run_osu_p2p_check.py
      --deputy $<TARGET_FILE:deputy_cli> --lib ${DEPUTY_MPI_LIB_DIR}/libdeputy-mpi-openmpi.so
      --cache ${CMAKE_BINARY_DIR}/osu)
  set_tests_properties(mpi.osu_p2p.openmpi PROPERTIES LABELS mpi SKIP_RETURN_CODE 77
    TIMEOUT 290 RUN_SERIAL TRUE)
endif()
