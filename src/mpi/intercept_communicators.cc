// The calls that create an intra-communicator, each followed by forming the
// new communicator's team (comm_team). Why here and not on first use: a
// team forms collectively over its communicator (an MPI_Allreduce and the
// members' join at the agent), which is safe only inside a call that every
// member makes at the same point of a blocking sequence. A communicator's
// creation is such a call (blocking and collective over the new members),
// while its first nonblocking collective is not: MPI lets ranks start
// nonblocking collectives on different communicators in different orders,
// and two ranks forming two teams in opposite orders would wait for each
// other for ever (docs/mpi.md, "Communicators"). As HCOLL and UCC do in
// Open MPI, whose collective components create their context when a
// communicator is created. A communicator this library did not see created
// (MPI_Comm_idup, which does not block; a Fortran program's under Open MPI,
// whose bindings call PMPI_*) forms its team at its first blocking
// collective; until then its nonblocking collectives go to MPI.
#include <mpi.h>

#include "mpi/comm_teams.h"
#include "mpi/export.h"
#include "mpi/runtime.h"

namespace {

int formed(int rc, MPI_Comm *newcomm) {
    const deputy::mpi::Runtime &rt = deputy::mpi::runtime();
    // Every member of the new communicator gets here (a rank left out,
    // MPI_COMM_NULL, does not); rt.disabled is the same on every rank.
    if (rc == MPI_SUCCESS && newcomm && *newcomm != MPI_COMM_NULL && rt.initialized &&
        !rt.disabled)
        deputy::mpi::offload_p2p(deputy::mpi::comm_team(*newcomm));
    return rc;
}

}  // namespace

extern "C" {

DEPUTY_MPI_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    return formed(PMPI_Comm_dup(comm, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    return formed(PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    return formed(PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                                          MPI_Comm *newcomm) {
    return formed(PMPI_Comm_split_type(comm, split_type, key, info, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    return formed(PMPI_Comm_create(comm, group, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag,
                                            MPI_Comm *newcomm) {
    return formed(PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[],
                                      const int periods[], int reorder, MPI_Comm *newcomm) {
    return formed(PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
    return formed(PMPI_Cart_sub(comm, remain_dims, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[],
                                       const int edges[], int reorder, MPI_Comm *newcomm) {
    return formed(PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm), newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[],
                                            const int degrees[], const int destinations[],
                                            const int weights[], MPI_Info info, int reorder,
                                            MPI_Comm *newcomm) {
    return formed(PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                         reorder, newcomm),
                  newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree,
                                                     const int sources[],
                                                     const int sourceweights[], int outdegree,
                                                     const int destinations[],
                                                     const int destweights[], MPI_Info info,
                                                     int reorder, MPI_Comm *newcomm) {
    return formed(PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights,
                                                  outdegree, destinations, destweights, info,
                                                  reorder, newcomm),
                  newcomm);
}

DEPUTY_MPI_EXPORT int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newcomm) {
    return formed(PMPI_Intercomm_merge(intercomm, high, newcomm), newcomm);
}

}  // extern "C"
