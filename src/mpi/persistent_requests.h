// Persistent point-to-point requests on communicators deputy carries
// (MPI_Send_init, MPI_Ssend_init, MPI_Rsend_init, MPI_Recv_init).
//
// MPI keeps a persistent request allocated across its operations: created
// inactive, started (MPI_Start, MPI_Startall), completed by a wait or a
// test, which leaves it inactive (not MPI_REQUEST_NULL) with its status,
// until MPI_Request_free. MPI has no persistent generalized request, so
// each of this library's is two MPI requests:
//  - the handle the program holds: a persistent request of MPI's own that
//    is never started (a send of nothing to MPI_PROC_NULL on
//    MPI_COMM_SELF). As it is, it is what MPI makes of any inactive
//    persistent request (a wait or test returns at once with an empty
//    status, MPI_Request_get_status says complete), MPI_Request_c2f and
//    MPI_Request_f2c keep it, and MPI_Request_free frees it;
//  - while started, the request of the operation deputy runs (a
//    generalized request: offload_requests.h), which stands in for it in
//    every wait and test (RequestView below); once MPI freed that one,
//    completed, the persistent request is inactive again.
// So every call that takes a request must come through this library: the
// C ones do (intercept_wait.cc), and under Open MPI, whose Fortran bindings
// call PMPI_* directly, the Fortran ones (fortran_entry_points.c). MPICH's
// Fortran bindings call the C MPI_* functions.
#pragma once

#include "mpi/comm_teams.h"

#include <mpi.h>

#include <functional>
#include <vector>

namespace deputy::mpi {

struct Persistent;

// Posts one operation of the request (what MPI_Isend, MPI_Issend or
// MPI_Irecv would with the same arguments): its MPI request in *active.
// MPI_SUCCESS, or the MPI error after printing deputy's reason.
using Starter = std::function<int(MPI_Request *active)>;

// A new persistent request on `comm`, whose point-to-point deputy carries
// on `team`, in *request, inactive. It keeps the team (team_use_begin)
// until it is freed.
int persistent_create(CommTeam *team, MPI_Comm comm, Starter start, MPI_Request *request);

// Whether any of this library's persistent requests exists (one relaxed
// load: the waits and tests of a program without any copy nothing).
bool persistent_any();

// MPI_Start: false if `request` is not one of this library's; else true,
// with *rc: MPI_SUCCESS once its operation is posted, or MPI_ERR_REQUEST
// (through its communicator's error handler) when it is active already.
bool persistent_start(MPI_Request request, int *rc);

// MPI_Request_free: false if *request is not one of this library's; else
// true, the request freed and *request MPI_REQUEST_NULL. An operation in
// progress completes all the same (MPI frees its request then).
bool persistent_free(MPI_Request *request);

// The requests to give MPI in place of a program's array for one wait or
// test: the array itself when it holds none of this library's persistent
// requests; otherwise a copy in which each active one is its operation's
// request (an inactive one stays, for MPI to answer as inactive). The
// destructor puts the program's handles back: MPI's answer for every other
// entry (MPI_REQUEST_NULL once complete), the persistent request for its
// own, inactive if MPI freed its completed operation. Statuses and indices
// MPI returns are the same positions in both arrays.
class RequestView {
  public:
    RequestView(MPI_Request *requests, int count);
    ~RequestView();
    RequestView(const RequestView &) = delete;
    RequestView &operator=(const RequestView &) = delete;
    MPI_Request *data() { return view_; }

  private:
    MPI_Request *requests_;
    int count_;
    MPI_Request *view_;
    std::vector<MPI_Request> copy_;
    std::vector<Persistent *> ours_;  // per entry, null for MPI's; empty: none of ours
};

}  // namespace deputy::mpi
