# The MPI libraries deputy builds against, each as an interface target
# `deputy_mpi_api_<flavor>` (its headers and its library): Open MPI
# (`openmpi`, pkg-config ompi-c) and MPICH (`mpich`, pkg-config mpich), both
# Debian packages installable side by side. DEPUTY_MPI_FLAVORS lists those
# found. libdeputy-mpi, its benchmark and its tests are built once per
# flavor, since the two MPIs' handles and ABI differ.
find_package(PkgConfig REQUIRED)
set(DEPUTY_MPI_FLAVORS "")

# flavor: openmpi | mpich; module: its pkg-config name; library: the MPI library's name.
function(deputy_find_mpi_flavor flavor module library)
  pkg_check_modules(DEPUTY_${flavor} QUIET ${module})
  if(NOT DEPUTY_${flavor}_FOUND)
    message(STATUS "MPI flavor ${flavor}: ${module}.pc not found (its builds are skipped)")
    return()
  endif()
  find_library(DEPUTY_${flavor}_LIB NAMES ${library} HINTS ${DEPUTY_${flavor}_LIBRARY_DIRS})
  if(NOT DEPUTY_${flavor}_LIB)
    message(STATUS "MPI flavor ${flavor}: lib${library}.so not found (its builds are skipped)")
    return()
  endif()
  add_library(deputy_mpi_api_${flavor} INTERFACE)
  target_include_directories(deputy_mpi_api_${flavor} SYSTEM INTERFACE
    ${DEPUTY_${flavor}_INCLUDE_DIRS})
  target_compile_definitions(deputy_mpi_api_${flavor} INTERFACE OMPI_SKIP_MPICXX=1
    MPICH_SKIP_MPICXX=1)
  target_link_libraries(deputy_mpi_api_${flavor} INTERFACE ${DEPUTY_${flavor}_LIB})
  set(DEPUTY_MPI_FLAVORS ${DEPUTY_MPI_FLAVORS} ${flavor} PARENT_SCOPE)
  set(DEPUTY_MPI_MODULE_${flavor} ${module} PARENT_SCOPE)
endfunction()

deputy_find_mpi_flavor(openmpi ompi-c mpi)
deputy_find_mpi_flavor(mpich mpich mpich)

# The MPI of deputy's own MPI programs (deputy-agent-mpi, deputy-bench-coll):
# the first flavor found, Open MPI before MPICH as Debian's default `mpirun`
# is Open MPI's. Found through pkg-config like the flavors, so a cross build
# finds its sysroot's MPI (there is no mpicc wrapper for the target to ask).
if(DEPUTY_MPI_FLAVORS)
  list(GET DEPUTY_MPI_FLAVORS 0 DEPUTY_MPI_DEFAULT)
  add_library(deputy_mpi_api ALIAS deputy_mpi_api_${DEPUTY_MPI_DEFAULT})
endif()
