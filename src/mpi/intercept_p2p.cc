// Point-to-point calls, offloaded with DEPUTY_MPI_P2P=1 (docs/mpi.md,
// "Point-to-point").
//
// MPI orders the messages of a communicator: a receive must see every
// message sent before it on that communicator, so a communicator's
// point-to-point goes either all to deputy or all to MPI, decided once
// when the communicator is created (comm_teams.h, offload_p2p) and the
// same on every member. On such a communicator every message is a deputy
// message (include/deputy/p2p.h: matched by the agent with MPI's rules,
// sources and tags as the communicator's ranks and MPI's tags); a call this
// library cannot carry there (a derived datatype, a buffered send, a
// matched probe, MPI_Cancel of a posted operation: intercept_wait.cc)
// stops the program with an error naming it and how to switch the offload
// off, never a silent reorder. (Synchronous sends are carried: deputy's
// never complete before a receive took them. Persistent requests are
// carried: persistent_requests.h.)
// Messages to or from MPI_PROC_NULL involve no peer: MPI handles them.
#include "mpi/comm_teams.h"
#include "mpi/datatypes.h"
#include "mpi/offload_requests.h"
#include "mpi/p2p_calls.h"
#include "mpi/persistent_requests.h"
#include "mpi/runtime.h"

#include <deputy/p2p.h>
#include <fmt/format.h>
#include <mpi.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "mpi/export.h"

namespace deputy::mpi {
namespace {

// The communicator's team when its point-to-point is deputy's; null: MPI's.
CommTeam *p2p_team(MPI_Comm comm) {
    if (!runtime().p2p || comm == MPI_COMM_NULL) return nullptr;
    CommTeam *ct = comm_team(comm, false);
    return ct->p2p ? ct : nullptr;
}

[[noreturn]] void cannot(const char *call, const std::string &why) {
    fatal(fmt::format("{} on a communicator whose point-to-point deputy carries "
                      "(DEPUTY_MPI_P2P=1): {}; MPI would then order its messages with deputy's "
                      "no more. Run without DEPUTY_MPI_P2P (deputy mpirun without --p2p)",
                      call, why));
}

// The message's bytes: count elements of a type deputy can move.
size_t message_bytes(P2pCall call, int count, MPI_Datatype type) {
    size_t element = 0;
    PassReason why;
    if (!dense_type_bytes(type, &element, &why))
        cannot(p2p_call_name(call), fmt::format("its datatype is not a predefined dense one ({})",
                                                pass_reason_name(why)));
    if (count < 0) cannot(p2p_call_name(call), fmt::format("count {}", count));
    return size_t(count) * element;
}

RangePins reach(P2pCall call, const void *buf, size_t bytes) {
    RangePins pins;
    std::string error;
    if (bytes && reach_memory(runtime().context, buf, bytes, &pins, &error) != DP_OK)
        fatal(std::string(p2p_call_name(call)) + ": " + error);
    return pins;
}

// A blocking call's error goes to the communicator's error handler, as
// MPI's own would (MPI_ERRORS_ARE_FATAL: the job stops; MPI_ERRORS_RETURN:
// the code comes back).
int raised(MPI_Comm comm, int rc) {
    if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

// MPI's wildcards as deputy's (MPICH's MPI_ANY_SOURCE is -2, Open MPI's -1).
int source_of(int source) { return source == MPI_ANY_SOURCE ? DP_ANY_SOURCE : source; }
int tag_of(int tag) { return tag == MPI_ANY_TAG ? DP_ANY_TAG : tag; }

// A send's post; a synchronous one (MPI_Ssend, MPI_Issend, MPI_Ssend_init)
// completes only once a receive took it.
Post send_post(P2pCall call, const void *buf, size_t bytes, int dest, int tag, dp_team_t *team) {
    const bool synchronous =
        call == P2pCall::issend || call == P2pCall::ssend || call == P2pCall::ssend_init;
    return [=](dp_request_t **req) {
        return synchronous ? dp_issend(buf, bytes, dest, tag, team, req)
                           : dp_isend(buf, bytes, dest, tag, team, req);
    };
}

Post recv_post(void *buf, size_t bytes, int source, int tag, dp_team_t *team) {
    const int from = source_of(source), t = tag_of(tag);
    return [=](dp_request_t **req) { return dp_irecv(buf, bytes, from, t, team, req); };
}

// A send (the call's kind, or `kind` when given: MPI_Sendrecv's part).
int isend(P2pCall call, const void *buf, int count, MPI_Datatype type, int dest, int tag,
          CommTeam *ct, MPI_Request *request, const RequestKind *kind = nullptr) {
    const size_t bytes = message_bytes(call, count, type);
    RangePins pins = reach(call, buf, bytes);
    Post post = send_post(call, buf, bytes, dest, tag, ct->team);
    RequestKind k = kind ? *kind : request_kind(call);
    k.receive = false;
    if (request) return start_request(k, ct, std::move(pins), std::move(post), {}, request);
    return run_blocking(k, ct, std::move(pins), post, {});
}

// A receive: its request reports the message (source, tag, bytes).
int irecv(P2pCall call, void *buf, int count, MPI_Datatype type, int source, int tag,
          CommTeam *ct, MPI_Request *request, MPI_Status *status) {
    const size_t bytes = message_bytes(call, count, type);
    RangePins pins = reach(call, buf, bytes);
    Post post = recv_post(buf, bytes, source, tag, ct->team);
    RequestKind k = request_kind(call);
    k.receive = true;
    if (request) return start_request(k, ct, std::move(pins), std::move(post), {}, request);
    return run_blocking(k, ct, std::move(pins), post, {}, status);
}

// MPI_Send_init, MPI_Ssend_init, MPI_Recv_init: a persistent request
// (persistent_requests.h) each of whose starts posts what the nonblocking
// call would, its buffer reached anew as each MPI_Isend's is.
int persistent(P2pCall call, const void *buf, size_t bytes, Post post, CommTeam *ct,
               MPI_Comm comm, MPI_Request *request) {
    const RequestKind kind = request_kind(call);
    Starter start = [=](MPI_Request *operation) {
        return start_request(kind, ct, reach(call, buf, bytes), post, {}, operation);
    };
    return persistent_create(ct, comm, std::move(start), request);
}

int send_init(P2pCall call, const void *buf, int count, MPI_Datatype type, int dest, int tag,
              CommTeam *ct, MPI_Comm comm, MPI_Request *request) {
    const size_t bytes = message_bytes(call, count, type);
    return persistent(call, buf, bytes, send_post(call, buf, bytes, dest, tag, ct->team), ct, comm,
                      request);
}

// MPI_Sendrecv: both posted, then both waited for (each may need the
// other's peer to move first).
int sendrecv(P2pCall call, const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
             int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
             int recvtag, CommTeam *ct, MPI_Status *status) {
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = source == MPI_PROC_NULL
                 ? PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, MPI_COMM_SELF, &reqs[0])
                 : irecv(call, recvbuf, recvcount, recvtype, source, recvtag, ct, &reqs[0], nullptr);
    if (rc != MPI_SUCCESS) return rc;
    // Counted once: by its receive, unless MPI had that one.
    RequestKind uncounted = request_kind(call);
    if (source != MPI_PROC_NULL) uncounted.offloaded = nullptr;
    rc = dest == MPI_PROC_NULL
             ? MPI_SUCCESS
             : isend(call, sendbuf, sendcount, sendtype, dest, sendtag, ct, &reqs[1], &uncounted);
    MPI_Status statuses[2];
    const int wrc = PMPI_Waitall(2, reqs, statuses);
    if (rc != MPI_SUCCESS) return rc;
    if (status != MPI_STATUS_IGNORE) *status = statuses[0];
    if (wrc == MPI_ERR_IN_STATUS)
        return statuses[0].MPI_ERROR != MPI_SUCCESS ? statuses[0].MPI_ERROR : statuses[1].MPI_ERROR;
    return wrc;
}

int probe(P2pCall call, int source, int tag, CommTeam *ct, int *flag, MPI_Status *status) {
    dp_msg_status_t msg{};
    int found = 0;
    const int from = source_of(source), t = tag_of(tag);
    for (;;) {
        const dp_status_t st = dp_iprobe(from, t, ct->team, &found, &msg);
        if (st != DP_OK) {
            warn(fmt::format("{} offloaded to deputy failed: {} ({})", p2p_call_name(call),
                             dp_strerror(st), dp_status_name(st)));
            return MPI_ERR_OTHER;
        }
        if (found || flag) break;
        // MPI_Probe: look again, leaving the CPU to whoever will send it
        // and progressing this rank's other requests.
        progress_requests();
        sched_yield();
    }
    if (flag) *flag = found;
    if (found) {
        const int kept = status != MPI_STATUS_IGNORE ? status->MPI_ERROR : 0;
        fill_status(msg, MPI_SUCCESS, status);
        if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = kept;
    }
    count(runtime().p2p_offloaded[size_t(call)]);
    return MPI_SUCCESS;
}

}  // namespace
}  // namespace deputy::mpi

using deputy::mpi::P2pCall;
using deputy::mpi::p2p_team;

extern "C" {

DEPUTY_MPI_EXPORT int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                                MPI_Comm comm, MPI_Request *request) {
    deputy::mpi::CommTeam *ct = dest == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Isend(buf, count, type, dest, tag, comm, request);
    return deputy::mpi::isend(P2pCall::isend, buf, count, type, dest, tag, ct, request);
}

DEPUTY_MPI_EXPORT int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                               MPI_Comm comm) {
    deputy::mpi::CommTeam *ct = dest == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Send(buf, count, type, dest, tag, comm);
    return deputy::mpi::raised(
        comm, deputy::mpi::isend(P2pCall::send, buf, count, type, dest, tag, ct, nullptr));
}

DEPUTY_MPI_EXPORT int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag,
                                MPI_Comm comm, MPI_Request *request) {
    deputy::mpi::CommTeam *ct = source == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Irecv(buf, count, type, source, tag, comm, request);
    return deputy::mpi::irecv(P2pCall::irecv, buf, count, type, source, tag, ct, request, nullptr);
}

DEPUTY_MPI_EXPORT int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                               MPI_Comm comm, MPI_Status *status) {
    deputy::mpi::CommTeam *ct = source == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Recv(buf, count, type, source, tag, comm, status);
    return deputy::mpi::raised(comm, deputy::mpi::irecv(P2pCall::recv, buf, count, type, source,
                                                        tag, ct, nullptr, status));
}

DEPUTY_MPI_EXPORT int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                   int dest, int sendtag, void *recvbuf, int recvcount,
                                   MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                                   MPI_Status *status) {
    deputy::mpi::CommTeam *ct = p2p_team(comm);
    if (!ct)
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    return deputy::mpi::raised(
        comm, deputy::mpi::sendrecv(P2pCall::sendrecv, sendbuf, sendcount, sendtype, dest,
                                    sendtag, recvbuf, recvcount, recvtype, source, recvtag, ct,
                                    status));
}

DEPUTY_MPI_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest,
                                           int sendtag, int source, int recvtag, MPI_Comm comm,
                                           MPI_Status *status) {
    deputy::mpi::CommTeam *ct = p2p_team(comm);
    if (!ct)
        return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm,
                                     status);
    // The message received into a copy while the buffer is sent, then
    // copied over it.
    const size_t bytes = deputy::mpi::message_bytes(P2pCall::sendrecv_replace, count, type);
    std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes ? bytes : 1]);
    const int rc = deputy::mpi::sendrecv(P2pCall::sendrecv_replace, buf, count, type, dest,
                                         sendtag, copy.get(), count, type, source, recvtag, ct,
                                         status);
    if (rc == MPI_SUCCESS && source != MPI_PROC_NULL) std::memcpy(buf, copy.get(), bytes);
    return deputy::mpi::raised(comm, rc);
}

DEPUTY_MPI_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
                                 MPI_Status *status) {
    deputy::mpi::CommTeam *ct = source == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Iprobe(source, tag, comm, flag, status);
    return deputy::mpi::probe(P2pCall::iprobe, source, tag, ct, flag, status);
}

DEPUTY_MPI_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    deputy::mpi::CommTeam *ct = source == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Probe(source, tag, comm, status);
    return deputy::mpi::probe(P2pCall::probe, source, tag, ct, nullptr, status);
}

// What cannot be carried yet: stopped on a communicator whose messages
// deputy carries, passed unchanged on any other.
#define DEPUTY_REFUSE_ON_P2P(call, comm, why)                                       \
    do {                                                                            \
        if (p2p_team(comm)) deputy::mpi::cannot(call, why);                         \
    } while (0)

DEPUTY_MPI_EXPORT int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                                MPI_Comm comm) {
    deputy::mpi::CommTeam *ct = dest == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Ssend(buf, count, type, dest, tag, comm);
    return deputy::mpi::raised(
        comm, deputy::mpi::isend(P2pCall::ssend, buf, count, type, dest, tag, ct, nullptr));
}
DEPUTY_MPI_EXPORT int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest,
                                 int tag, MPI_Comm comm, MPI_Request *request) {
    deputy::mpi::CommTeam *ct = dest == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Issend(buf, count, type, dest, tag, comm, request);
    return deputy::mpi::isend(P2pCall::issend, buf, count, type, dest, tag, ct, request);
}
DEPUTY_MPI_EXPORT int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                                MPI_Comm comm) {
    DEPUTY_REFUSE_ON_P2P("MPI_Bsend", comm, "buffered sends are not carried yet");
    return PMPI_Bsend(buf, count, type, dest, tag, comm);
}
DEPUTY_MPI_EXPORT int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest,
                                 int tag, MPI_Comm comm, MPI_Request *request) {
    DEPUTY_REFUSE_ON_P2P("MPI_Ibsend", comm, "buffered sends are not carried yet");
    return PMPI_Ibsend(buf, count, type, dest, tag, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                                MPI_Comm comm) {
    // A ready send may be a standard one (MPI 3.1, 3.4).
    return MPI_Send(buf, count, type, dest, tag, comm);
}
DEPUTY_MPI_EXPORT int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest,
                                 int tag, MPI_Comm comm, MPI_Request *request) {
    return MPI_Isend(buf, count, type, dest, tag, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest,
                                    int tag, MPI_Comm comm, MPI_Request *request) {
    deputy::mpi::CommTeam *ct = dest == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Send_init(buf, count, type, dest, tag, comm, request);
    return deputy::mpi::send_init(P2pCall::send_init, buf, count, type, dest, tag, ct, comm,
                                  request);
}
DEPUTY_MPI_EXPORT int MPI_Ssend_init(const void *buf, int count, MPI_Datatype type, int dest,
                                     int tag, MPI_Comm comm, MPI_Request *request) {
    deputy::mpi::CommTeam *ct = dest == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Ssend_init(buf, count, type, dest, tag, comm, request);
    return deputy::mpi::send_init(P2pCall::ssend_init, buf, count, type, dest, tag, ct, comm,
                                  request);
}
DEPUTY_MPI_EXPORT int MPI_Rsend_init(const void *buf, int count, MPI_Datatype type, int dest,
                                     int tag, MPI_Comm comm, MPI_Request *request) {
    // A ready send may be a standard one (MPI 3.1, 3.4).
    deputy::mpi::CommTeam *ct = dest == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Rsend_init(buf, count, type, dest, tag, comm, request);
    return MPI_Send_init(buf, count, type, dest, tag, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag,
                                    MPI_Comm comm, MPI_Request *request) {
    deputy::mpi::CommTeam *ct = source == MPI_PROC_NULL ? nullptr : p2p_team(comm);
    if (!ct) return PMPI_Recv_init(buf, count, type, source, tag, comm, request);
    const size_t bytes = deputy::mpi::message_bytes(P2pCall::recv_init, count, type);
    return deputy::mpi::persistent(P2pCall::recv_init, buf, bytes,
                                   deputy::mpi::recv_post(buf, bytes, source, tag, ct->team), ct,
                                   comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest,
                                     int tag, MPI_Comm comm, MPI_Request *request) {
    DEPUTY_REFUSE_ON_P2P("MPI_Bsend_init", comm, "buffered sends are not carried yet");
    return PMPI_Bsend_init(buf, count, type, dest, tag, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message,
                                 MPI_Status *status) {
    DEPUTY_REFUSE_ON_P2P("MPI_Mprobe", comm, "matched probes are not carried yet");
    return PMPI_Mprobe(source, tag, comm, message, status);
}
DEPUTY_MPI_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag,
                                  MPI_Message *message, MPI_Status *status) {
    DEPUTY_REFUSE_ON_P2P("MPI_Improbe", comm, "matched probes are not carried yet");
    return PMPI_Improbe(source, tag, comm, flag, message, status);
}

}  // extern "C"
