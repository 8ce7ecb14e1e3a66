// The MPI entry points this library defines are its only exports (it is
// built with hidden visibility). Open MPI's mpi.h already marks its
// prototypes visible; MPICH's does so only while building MPICH itself.
#pragma once

#define DEPUTY_MPI_EXPORT __attribute__((visibility("default")))
