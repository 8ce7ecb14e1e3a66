# Fortran programs and libdeputy-mpi (run_fortran_check.sh): one ctest case
# per MPI, label "mpi". Each builds offload_check.f90 with that MPI's
# mpifort, runs it on 2 and 3 ranks without and with the library and a
# private agent, and fails if the results differ or if any collective the
# library intercepts was not offloaded from Fortran; then its
# point-to-point cases with DEPUTY_MPI_P2P=1, which fail unless every call
# was carried and the agent carried (or saw the receivers copy) exactly the
# messages the ranks sent.
# Skipped, with the reason, when gfortran, the MPI or its libdeputy-mpi
# build is missing (DEPUTY_MPI_LIBRARY=OFF, as in the sanitizer builds).
#
# Included from tests/mpi/tests.cmake.
foreach(flavor openmpi mpich)
  set(library ${CMAKE_BINARY_DIR}/src/mpi/libdeputy-mpi-${flavor}.so)
  if(TARGET deputy_mpi_${flavor})
    set(library $<TARGET_FILE:deputy_mpi_${flavor}>)
  endif()
  add_test(NAME mpi_fortran_offload_${flavor}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_fortran_check.sh --mpi ${flavor}
      --build ${CMAKE_BINARY_DIR} --library ${library})
  # 3 ranks on 2 cores: ctest runs nothing beside it.
  set_tests_properties(mpi_fortran_offload_${flavor} PROPERTIES
    LABELS mpi SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 900)
endforeach()
