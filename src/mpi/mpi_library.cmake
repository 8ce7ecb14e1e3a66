# libdeputy-mpi: the PMPI library, once per MPI flavor found
# (cmake/MpiFlavors.cmake): libdeputy-mpi-openmpi.so and
# libdeputy-mpi-mpich.so, side by side in build/src/mpi and the install's
# libdir, each with a pkg-config file. DEPUTY_MPI_LIBRARY=OFF skips them
# (the sanitizer build of the test script).
option(DEPUTY_MPI_LIBRARY "build libdeputy-mpi for each MPI found (Open MPI, MPICH)" ON)
# The malloc interposer (src/preload) too: an MPI program's buffers land in
# the shared heap the agent maps.
file(GLOB DEPUTY_MPI_LIBRARY_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cc
  ${CMAKE_CURRENT_LIST_DIR}/*.c)
list(APPEND DEPUTY_MPI_LIBRARY_SOURCES ${DEPUTY_HEAP_INTERPOSE_SOURCE})
# Sizes as the rest of deputy prints them (libdeputy.so exports only the C API).
list(APPEND DEPUTY_MPI_LIBRARY_SOURCES ${PROJECT_SOURCE_DIR}/src/common/units.cc)
find_package(fmt QUIET)

if(DEPUTY_MPI_LIBRARY)
  foreach(flavor ${DEPUTY_MPI_FLAVORS})
    set(target deputy_mpi_${flavor})
    add_library(${target} SHARED ${DEPUTY_MPI_LIBRARY_SOURCES})
    set_target_properties(${target} PROPERTIES OUTPUT_NAME deputy-mpi-${flavor}
      INSTALL_RPATH "$ORIGIN" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
      VISIBILITY_INLINES_HIDDEN ON LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/src/mpi)
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_compile_definitions(${target} PRIVATE DEPUTY_MPI_FLAVOR="${flavor}")
    target_link_libraries(${target} PRIVATE deputy deputy_mpi_api_${flavor} ${CMAKE_DL_LIBS})
    if(TARGET fmt::fmt)
      target_link_libraries(${target} PRIVATE fmt::fmt)
    endif()
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
    set(DEPUTY_MPI_FLAVOR ${flavor})
    set(DEPUTY_MPI_MODULE ${DEPUTY_MPI_MODULE_${flavor}})
    configure_file(${CMAKE_CURRENT_LIST_DIR}/deputy-mpi.pc.in
      ${CMAKE_BINARY_DIR}/deputy-mpi-${flavor}.pc @ONLY)
    install(FILES ${CMAKE_BINARY_DIR}/deputy-mpi-${flavor}.pc
      DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  endforeach()
endif()
