// MPI_Wait and MPI_Test, the calls that finish one request, with a fast
// way for deputy's: an offloaded operation that deputy has finished is
// completed here, before MPI runs a turn of its progress engine (every
// registered callback, Open MPI's shared-memory and libnbc progress among
// them) only to reach this library's hook, which does the same. Any other
// request goes to MPI as before; the progress hook still completes deputy's
// requests there. Fortran's MPI_WAIT and MPI_WAITALL come here through the
// library's own Fortran entry points (fortran_entry_points.c).
// Measured on 64-128 KiB operations, the agent on a core of its own: the
// wait after the compute phase 1.4-2.1 us -> 0.8-1.2 us (docs/mpi.md).
//
// While a thread is in MPI_Wait* for deputy's requests, the hook tests
// those as a wait (InWait), so that the members of a team may run an
// operation themselves when all of them wait for it (docs/mpi.md).
#include <mpi.h>

#include "mpi/export.h"
#include "mpi/offload_requests.h"

extern "C" {

DEPUTY_MPI_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    if (!request) return PMPI_Wait(request, status);
    deputy::mpi::complete_finished(*request);
    deputy::mpi::InWait in_wait(request, 1);
    const int rc = PMPI_Wait(request, status);
    if (rc != MPI_SUCCESS) in_wait.leave_pending();  // an error may return before completion
    return rc;
}

// MPI_Waitall returns once every request is complete (or at an error): each
// of deputy's among them is tested as a wait.
DEPUTY_MPI_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    deputy::mpi::InWait in_wait(requests, count);
    const int rc = PMPI_Waitall(count, requests, statuses);
    if (rc != MPI_SUCCESS) in_wait.leave_pending();
    return rc;
}

// MPI_Waitany and MPI_Waitsome return at the first request complete: those
// of deputy's still pending then leave the wait (InWait::leave_pending), so
// that no teammate running one of them waits for this rank to come back.
DEPUTY_MPI_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index,
                                  MPI_Status *status) {
    deputy::mpi::InWait in_wait(requests, count);
    const int rc = PMPI_Waitany(count, requests, index, status);
    in_wait.leave_pending();
    return rc;
}

DEPUTY_MPI_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount,
                                   int indices[], MPI_Status statuses[]) {
    deputy::mpi::InWait in_wait(requests, incount);
    const int rc = PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    in_wait.leave_pending();
    return rc;
}

DEPUTY_MPI_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    if (request) deputy::mpi::complete_finished(*request);
    return PMPI_Test(request, flag, status);
}

}  // extern "C"
