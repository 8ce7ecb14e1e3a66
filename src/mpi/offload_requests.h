// deputy operations as MPI requests.
//
// Each offloaded nonblocking collective returns a real MPI request: a
// generalized request (MPI_Grequest_start) that this library completes as
// soon as deputy's completion flag says so. The flag is tested from inside
// MPI's own progress engine, so every MPI call that waits or tests
// (MPI_Wait, MPI_Testsome, arrays mixing deputy's requests with MPI's,
// Fortran's bindings that call PMPI_* directly) sees the request complete
// without this library wrapping any of them:
//  - Open MPI: a callback registered with opal_progress_register, which its
//    progress loop calls on every turn;
//  - MPICH: MPIX_Grequest_start's poll function, which its progress engine
//    calls for every outstanding generalized request.
// The MPI request then fills its status as MPI does for a collective (source
// and tag 0, zero elements), or for a receive as the message says (source,
// tag, its bytes), and fails with MPI_ERR_OTHER when deputy's operation
// failed (the reason printed once on stderr), MPI_ERR_TRUNCATE when a
// message was longer than its receive.
#pragma once

#include "mpi/comm_teams.h"
#include "mpi/operations.h"
#include "mpi/p2p_calls.h"
#include "mpi/registered_memory.h"

#include <deputy/coll.h>
#include <deputy/p2p.h>
#include <mpi.h>

#include <atomic>
#include <functional>

namespace deputy::mpi {

// What a request is: its MPI name (failures), the report's counter, and
// whether it takes one of the team's point-to-point slots (and, for a
// receive, reports a message's status) or one of its collective slots.
struct RequestKind {
    const char *mpi_name;
    std::atomic<uint64_t> *offloaded;  // null: counted by another request of the same call
    bool p2p = false;
    bool receive = false;
};
RequestKind request_kind(Operation op);
RequestKind request_kind(P2pCall call);

// Posts the operation again (with the same arguments) into *req.
using Post = std::function<dp_status_t(dp_request_t **req)>;
// Runs once deputy's operation completed without error, before MPI sees
// the request complete: the root of a gather into a derived datatype
// unpacks its packed copy here. Local work only (it may run inside MPI's
// progress engine).
using Finish = std::function<void()>;

// Hooks this library into MPI's progress engine; false (with a warning)
// when it cannot, and then nothing is offloaded as a request.
bool requests_start();
// Posts `post` on `team` (waiting while deputy's outstanding slots are
// full) and returns the MPI request in *request. MPI_SUCCESS, or the MPI
// error after printing deputy's reason.
int start_request(const RequestKind &kind, CommTeam *team, RangePins pins, Post post,
                  Finish then, MPI_Request *request);
// Runs a blocking form: posts, waits, runs `then`, releases. MPI_SUCCESS or
// an MPI error; a receive's status in *status (MPI_STATUS_IGNORE: none).
int run_blocking(const RequestKind &kind, CommTeam *team, RangePins pins, const Post &post,
                 const Finish &then, MPI_Status *status = MPI_STATUS_IGNORE);
// A received message's status as MPI reports it (elements counted in bytes).
void fill_status(const dp_msg_status_t &msg, int error, MPI_Status *status);
// Tests every outstanding request and completes those deputy finished.
int progress_requests();
// Whether `request` is one of this library's point-to-point requests that
// deputy has not finished (those it has are completed first).
bool p2p_pending(MPI_Request request);
// If `request` is one of this library's outstanding requests, tests them
// all (as progress_requests) so that a finished one is complete when MPI
// looks at it; nothing otherwise (one relaxed load when none is outstanding).
void complete_finished(MPI_Request request);
// While an object lives, this thread is in MPI_Wait* for `requests`: MPI
// loops on its progress engine until they are complete, so the progress of
// this library's requests tests those of them as a wait (dp_test_in_wait),
// and the members of their teams may run them themselves. A wait that
// returned with some of them still pending (MPI_Waitany, MPI_Waitsome, an
// error) calls leave_pending() before it returns.
class InWait {
  public:
    InWait(const MPI_Request *requests, int count);
    ~InWait();
    InWait(const InWait &) = delete;
    InWait &operator=(const InWait &) = delete;
    // Ends the wait of deputy's requests among `requests` (as the wait
    // left them: completed ones are MPI_REQUEST_NULL) that are still
    // pending, on all their teams at once (dp_teams_leave_wait), so that
    // no teammate waits for this rank's part until it calls again.
    void leave_pending();

  private:
    const MPI_Request *requests_;
    int count_;
    size_t previous_size_;
};
// MPI_Finalize: waits for every outstanding request; unhooks.
void requests_stop();

}  // namespace deputy::mpi
