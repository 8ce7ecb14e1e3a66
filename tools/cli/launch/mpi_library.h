// The PMPI library a rank preloads (src/mpi): libdeputy-mpi-openmpi.so or
// libdeputy-mpi-mpich.so, by the flavor of the MPI that runs it. Looked
// for, in this order, beside the running deputy binary's build tree
// (<dir of deputy>/../src/mpi/) and in the install libdir
// (<dir of deputy>/../<libdir>/, then the configured absolute libdir).
#pragma once

#include <string>
#include <vector>

#include "cli/launch/mpi_flavor.h"

namespace deputy::launch {

// Where the library of `flavor` may be, in the order looked at.
std::vector<std::string> mpi_library_candidates(MpiFlavor flavor);

// The first candidate that exists, or empty with `*error` naming every
// path tried and how to give one (--mpi-lib).
std::string find_mpi_library(MpiFlavor flavor, std::string *error);

// The absolute path of the running deputy binary.
std::string self_path();

}  // namespace deputy::launch
