// The calls that take requests: the waits and tests, MPI_Request_get_status,
// MPI_Start, MPI_Startall, MPI_Request_free and MPI_Cancel.
//
// Each gives MPI a RequestView of its requests (persistent_requests.h): this
// library's persistent requests stand there for the operation they run, and
// come back to the program as themselves, inactive once it completed.
// Without any of those the view is the program's own array.
//
// MPI_Wait and MPI_Test, the calls that finish one request, have a fast way
// for deputy's: an offloaded operation that deputy has finished is
// completed here, before MPI runs a turn of its progress engine (every
// registered callback, Open MPI's shared-memory and libnbc progress among
// them) only to reach this library's hook, which does the same. Any other
// request goes to MPI as before; the progress hook still completes deputy's
// requests there. Fortran's calls under Open MPI come here through the
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
#include "mpi/persistent_requests.h"
#include "mpi/runtime.h"

#include <vector>

using deputy::mpi::InWait;
using deputy::mpi::RequestView;

extern "C" {

DEPUTY_MPI_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    if (!request) return PMPI_Wait(request, status);
    RequestView view(request, 1);
    deputy::mpi::complete_finished(*view.data());
    InWait in_wait(view.data(), 1);
    const int rc = PMPI_Wait(view.data(), status);
    if (rc != MPI_SUCCESS) in_wait.leave_pending();  // an error may return before completion
    return rc;
}

// MPI_Waitall returns once every request is complete (or at an error): each
// of deputy's among them is tested as a wait.
DEPUTY_MPI_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    RequestView view(requests, count);
    InWait in_wait(view.data(), count);
    const int rc = PMPI_Waitall(count, view.data(), statuses);
    if (rc != MPI_SUCCESS) in_wait.leave_pending();
    return rc;
}

// MPI_Waitany and MPI_Waitsome return at the first request complete: those
// of deputy's still pending then leave the wait (InWait::leave_pending), so
// that no teammate running one of them waits for this rank to come back.
DEPUTY_MPI_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index,
                                  MPI_Status *status) {
    RequestView view(requests, count);
    InWait in_wait(view.data(), count);
    const int rc = PMPI_Waitany(count, view.data(), index, status);
    in_wait.leave_pending();
    return rc;
}

DEPUTY_MPI_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount,
                                   int indices[], MPI_Status statuses[]) {
    RequestView view(requests, incount);
    InWait in_wait(view.data(), incount);
    const int rc = PMPI_Waitsome(incount, view.data(), outcount, indices, statuses);
    in_wait.leave_pending();
    return rc;
}

DEPUTY_MPI_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    if (!request) return PMPI_Test(request, flag, status);
    RequestView view(request, 1);
    deputy::mpi::complete_finished(*view.data());
    return PMPI_Test(view.data(), flag, status);
}

DEPUTY_MPI_EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag,
                                  MPI_Status statuses[]) {
    RequestView view(requests, count);
    return PMPI_Testall(count, view.data(), flag, statuses);
}

DEPUTY_MPI_EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                                  MPI_Status *status) {
    RequestView view(requests, count);
    return PMPI_Testany(count, view.data(), index, flag, status);
}

DEPUTY_MPI_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int *outcount,
                                   int indices[], MPI_Status statuses[]) {
    RequestView view(requests, incount);
    return PMPI_Testsome(incount, view.data(), outcount, indices, statuses);
}

// Like a test that frees nothing: a persistent request stays active until
// a wait or test completes its operation. MPICH's MPI_Request_get_status
// never calls a generalized request's poll function (MPI_Test and MPI_Wait
// do), so an offloaded request would never be seen complete there; Open
// MPI's runs its progress engine, which calls ours. Testing deputy's
// requests first costs one load when none is outstanding.
DEPUTY_MPI_EXPORT int MPI_Request_get_status(MPI_Request request, int *flag,
                                             MPI_Status *status) {
    RequestView view(&request, 1);
    deputy::mpi::progress_requests();
    return PMPI_Request_get_status(*view.data(), flag, status);
}

DEPUTY_MPI_EXPORT int MPI_Start(MPI_Request *request) {
    int rc = MPI_SUCCESS;
    if (request && deputy::mpi::persistent_start(*request, &rc)) return rc;
    return PMPI_Start(request);
}

// This library's requests are started one by one, MPI's own (of other
// communicators, or to MPI_PROC_NULL) together in one PMPI_Startall. The
// first error is returned.
DEPUTY_MPI_EXPORT int MPI_Startall(int count, MPI_Request requests[]) {
    if (!deputy::mpi::persistent_any() || !requests || count <= 0)
        return PMPI_Startall(count, requests);
    std::vector<MPI_Request> mpis;
    int rc = MPI_SUCCESS;
    for (int i = 0; i < count; ++i) {
        int one = MPI_SUCCESS;
        if (!deputy::mpi::persistent_start(requests[i], &one)) mpis.push_back(requests[i]);
        if (rc == MPI_SUCCESS) rc = one;
    }
    // Starting leaves a persistent request's handle as it is: the copy's
    // need not be copied back.
    const int mpi_rc = mpis.empty() ? MPI_SUCCESS : PMPI_Startall(int(mpis.size()), mpis.data());
    return rc != MPI_SUCCESS ? rc : mpi_rc;
}

DEPUTY_MPI_EXPORT int MPI_Request_free(MPI_Request *request) {
    if (deputy::mpi::persistent_free(request)) return MPI_SUCCESS;
    return PMPI_Request_free(request);
}

// deputy has no way to take back a posted message or receive, and MPI
// requires a cancelled operation to complete whatever the other ranks do
// (a receive no message will ever match, say): so a point-to-point
// operation deputy runs is not cancelled but stops the program, saying
// why. Anything else is MPI's to cancel: its own requests, a completed
// operation (the cancel then fails, as MPI says), an inactive persistent
// request (MPI answers as for its own: Open MPI 4.1 does nothing, MPICH
// 4.0 returns an error), a collective's generalized request (MPI forbids
// cancelling a collective; the cancel does nothing).
DEPUTY_MPI_EXPORT int MPI_Cancel(MPI_Request *request) {
    if (!request) return PMPI_Cancel(request);
    RequestView view(request, 1);
    if (deputy::mpi::p2p_pending(*view.data()))
        deputy::mpi::fatal(
            "MPI_Cancel of a point-to-point operation deputy carries (DEPUTY_MPI_P2P=1): deputy "
            "cannot take back a message or a receive once posted, and MPI requires a cancelled "
            "operation to complete whatever the other ranks do. Run without DEPUTY_MPI_P2P "
            "(deputy mpirun without --p2p)");
    return PMPI_Cancel(view.data());
}

}  // extern "C"
