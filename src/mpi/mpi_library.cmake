# libdeputy-mpi: the PMPI library, once per MPI installed (the MPI's handles
# and ABI differ, so one build per MPI): libdeputy-mpi-openmpi.so and
# libdeputy-mpi-mpich.so, side by side, each with a pkg-config file.
# DEPUTY_MPI_LIBRARY=OFF skips them (the sanitizer build of the test script).
option(DEPUTY_MPI_LIBRARY "build libdeputy-mpi for each MPI found (Open MPI, MPICH)" ON)
file(GLOB DEPUTY_MPI_LIBRARY_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cc
  ${CMAKE_CURRENT_LIST_DIR}/*.c)
find_package(fmt QUIET)

# flavor: openmpi | mpich; module: its pkg-config name; library: the MPI library's name.
function(deputy_mpi_library flavor module library)
  pkg_check_modules(DEPUTY_${flavor} QUIET ${module})
  if(NOT DEPUTY_${flavor}_FOUND)
    message(STATUS "libdeputy-mpi-${flavor}: ${module}.pc not found, not built")
    return()
  endif()
  find_library(DEPUTY_${flavor}_LIB NAMES ${library} HINTS ${DEPUTY_${flavor}_LIBRARY_DIRS}
)
  if(NOT DEPUTY_${flavor}_LIB)
    message(STATUS "libdeputy-mpi-${flavor}: lib${library}.so not found, not built")
    return()
  endif()
  set(target deputy_mpi_${flavor})
  add_library(${target} SHARED ${DEPUTY_MPI_LIBRARY_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME deputy-mpi-${flavor}
    INSTALL_RPATH "$ORIGIN" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/src/mpi)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_include_directories(${target} SYSTEM PRIVATE ${DEPUTY_${flavor}_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1
    DEPUTY_MPI_FLAVOR="${flavor}")
  target_link_libraries(${target} PRIVATE deputy ${DEPUTY_${flavor}_LIB} ${CMAKE_DL_LIBS})
  if(TARGET fmt::fmt)
    target_link_libraries(${target} PRIVATE fmt::fmt)
  endif()
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set(DEPUTY_MPI_FLAVOR ${flavor})
  set(DEPUTY_MPI_MODULE ${module})
  configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/deputy-mpi.pc.in
    ${CMAKE_BINARY_DIR}/deputy-mpi-${flavor}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/deputy-mpi-${flavor}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

if(DEPUTY_MPI_LIBRARY)
  find_package(PkgConfig REQUIRED)
  deputy_mpi_library(openmpi ompi-c mpi)
  deputy_mpi_library(mpich mpich mpich)
endif()
