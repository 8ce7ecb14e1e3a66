# The applications of examples/ (plain MPI programs), label `mpi`: each
# gives the same result lines and passes its own check under `deputy
# mpirun` as under the MPI's own launcher, both MPIs, and the report shows
# the operations it posts offloaded (tests/apps/run_app_check.py). Not in
# sanitizer builds, for the reasons of tests/mpi/tests.cmake.
if(DEPUTY_SANITIZE OR NOT DEPUTY_BUILD_EXAMPLES)
  return()
endif()
find_package(Python3 COMPONENTS Interpreter)
set(DEPUTY_APPS_PYTHON python3)
if(Python3_Interpreter_FOUND)
  set(DEPUTY_APPS_PYTHON ${Python3_EXECUTABLE})
endif()

# RANKS|ARGS|OPS (run_app_check.py --case). 1 rank: communicators of one
# rank; even and uneven grids (MPI_Ialltoall / MPI_Ialltoallv); the
# blocking baseline (MPI_Alltoall).
set(DEPUTY_FFT3D_CASES
  "1|-n 12 -i 1 -x 0|"
  "2|--grid 16,12,10 --pgrid 2x1 --slabs 3 -i 1 -x 0|MPI_Ialltoall"
  "2|--grid 15,13,11 --pgrid 1x2 --slabs 4 -i 1 -x 0|MPI_Ialltoallv"
  "3|--grid 9,9,6 -i 1 -x 0|MPI_Ialltoall"
  "4|--grid 16,16,16 --pgrid 2x2 -i 1 -x 0|MPI_Ialltoall"
  "4|--grid 17,10,9 --pgrid 2x2 --slabs 2 -i 1 -x 0|MPI_Ialltoallv"
  "4|--grid 16,12,8 --pgrid 2x2 --blocking -i 1 -x 0|MPI_Alltoall")

# lu: 1-4 ranks, column grids (the default) and 2-D ones (the pivot search
# across ranks), n not a multiple of nb, ranks holding no block, the
# baseline without look-ahead (blocking MPI_Bcast).
set(DEPUTY_LU_CASES
  "1|-n 100 --nb 16|"
  "2|-n 257 --nb 32|MPI_Ibcast,MPI_Allreduce"
  "2|-n 257 --nb 32 --no-lookahead|MPI_Bcast"
  "3|-n 200 --nb 16 -p 3 -q 1|MPI_Allreduce"
  "4|-n 300 --nb 16 -p 2 -q 2|MPI_Ibcast,MPI_Allreduce"
  "4|-n 10 --nb 8|")

# stencil3d under `deputy mpirun --p2p` (its halos through deputy): 1-4
# ranks (8 is more than this machine's tests can afford; 2x2x2 by hand:
# examples/stencil3d/README.md), uneven blocks, the baseline without
# overlap, persistent requests, 4 ranks on 2 simulated nodes (halos
# between agents); the checksum and the serial check as under plain MPI.
set(DEPUTY_STENCIL3D_CASES
  "1|-n 12 -i 2 -x 1|"
  "2|--grid 17,9,8 -i 3 -x 1|MPI_Isend,MPI_Irecv"
  "3|-n 10 -i 2 -x 0|MPI_Isend,MPI_Irecv"
  "4|--grid 16,12,9 --pgrid 2x2x1 -i 3 -x 1|MPI_Isend,MPI_Irecv"
  "4|-n 12 --no-overlap -i 2 -x 1|MPI_Isend,MPI_Irecv"
  "2|--grid 17,9,8 -i 3 -x 1 --persistent|MPI_Send_init,MPI_Recv_init"
  "4|--grid 14,12,10 -i 2 -x 1|MPI_Isend,MPI_Irecv|2")

foreach(mpi ${DEPUTY_MPI_FLAVORS})
  foreach(app fft3d lu stencil3d)
    string(TOUPPER ${app} APP)
    set(cases "")
    foreach(c ${DEPUTY_${APP}_CASES})
      list(APPEND cases --case "${c}")
    endforeach()
    if(app STREQUAL stencil3d)
      list(APPEND cases --p2p)
    endif()
    add_test(NAME mpi.apps.${app}.${mpi}
      COMMAND ${DEPUTY_APPS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/run_app_check.py --mpi ${mpi}
        --prog $<TARGET_FILE:${app}_${mpi}> --deputy $<TARGET_FILE:deputy_cli>
        --lib ${CMAKE_BINARY_DIR}/src/mpi/libdeputy-mpi-${mpi}.so ${cases})
    # OpenBLAS single-threaded: ranks already fill the cores.
    set_tests_properties(mpi.apps.${app}.${mpi} PROPERTIES LABELS mpi SKIP_RETURN_CODE 77
      TIMEOUT 280 RUN_SERIAL TRUE ENVIRONMENT OPENBLAS_NUM_THREADS=1)
  endforeach()
endforeach()
