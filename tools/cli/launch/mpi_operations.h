// `deputy mpirun --operations`: the operations libdeputy-mpi intercepts, as
// its one table has them (src/mpi/operations.h), for users choosing
// DEPUTY_MPI_THRESHOLDS and for scripts and tests that must cover them all.
#pragma once

#include <cstdio>

namespace deputy::tools {

// One line per operation: MPI name, DEPUTY_MPI_THRESHOLDS key, nonblocking
// or blocking, default threshold on shared cores and with the agent on a
// core of its own (bytes per rank: 0, 64K, 1M, never, tune); a header line
// starting with '#'.
void print_mpi_operations(std::FILE *out);

}  // namespace deputy::tools
