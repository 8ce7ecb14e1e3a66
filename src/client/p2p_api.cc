// The C API of include/deputy/p2p.h over client::TeamP2p.
#include <deputy/p2p.h>

#include "channel/coll_post.h"
#include "channel/p2p_post.h"
#include "client/handles.h"
#include "client/p2p.h"
#include "client/team.h"
#include "common/check.h"
#include "common/log.h"

namespace {

using deputy::client::Request;
using deputy::client::TeamP2p;
namespace ch = deputy::channel;

// What the arguments alone can tell; the agent checks the buffer against
// the member's memory.
dp_status_t check(const char *fn, bool send, const void *buf, size_t bytes, int peer, int tag,
                  dp_team_t *team) {
    if (team == nullptr) DP_FAIL(DP_ERR_INVALID, "{}: team is NULL", fn);
    const int size = team->impl->size();
    if (send ? (peer < 0 || peer >= size) : (peer < DP_ANY_SOURCE || peer >= size))
        DP_FAIL(DP_ERR_INVALID, "{}: {} {} is not a rank of this team (0..{}{})", fn,
                send ? "destination" : "source", peer, size - 1,
                send ? "" : " or DP_ANY_SOURCE");
    if (send ? tag < 0 : tag < DP_ANY_TAG)
        DP_FAIL(DP_ERR_INVALID, "{}: tag {} (0..DP_TAG_MAX{})", fn, tag,
                send ? "" : " or DP_ANY_TAG");
    if (bytes && buf == nullptr) DP_FAIL(DP_ERR_INVALID, "{}: a NULL buffer of {} bytes", fn, bytes);
    if (bytes > ch::kMaxCollBytes)
        DP_FAIL(DP_ERR_TOO_LARGE, "{}: {} bytes (the most is {})", fn, bytes, ch::kMaxCollBytes);
    return DP_OK;
}

dp_status_t post(const char *fn, uint8_t opcode, uint8_t flags, const void *buf, size_t bytes,
                 int peer, int tag, dp_team_t *team, dp_request_t **req) {
    if (req == nullptr) return DP_ERR_INVALID;
    *req = nullptr;
    DP_CHECK(check(fn, opcode == ch::kP2pSend, buf, bytes, peer, tag, team));
    TeamP2p *p2p = nullptr;
    DP_CHECK(team->impl->p2p(&p2p));
    Request *r = nullptr;
    DP_CHECK(p2p->post(opcode, flags, buf, bytes, peer, tag, &r));
    // A dp_request_t is the Request itself (as for collectives).
    *req = reinterpret_cast<dp_request_t *>(r);
    return DP_OK;
}

}  // namespace

extern "C" dp_status_t dp_isend(const void *buf, size_t bytes, int dest, int tag,
                                dp_team_t *team, dp_request_t **req) {
    return post("dp_isend", ch::kP2pSend, 0, buf, bytes, dest, tag, team, req);
}

extern "C" dp_status_t dp_issend(const void *buf, size_t bytes, int dest, int tag,
                                 dp_team_t *team, dp_request_t **req) {
    return post("dp_issend", ch::kP2pSend, ch::kP2pSynchronous, buf, bytes, dest, tag, team, req);
}

extern "C" dp_status_t dp_irecv(void *buf, size_t bytes, int source, int tag, dp_team_t *team,
                                dp_request_t **req) {
    return post("dp_irecv", ch::kP2pRecv, 0, buf, bytes, source, tag, team, req);
}

namespace {

// A blocking send: its nonblocking form posted, waited for, freed.
dp_status_t send_and_wait(decltype(&dp_isend) isend, const void *buf, size_t bytes, int dest,
                          int tag, dp_team_t *team) {
    dp_request_t *req = nullptr;
    DP_CHECK(isend(buf, bytes, dest, tag, team, &req));
    const dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}

}  // namespace

extern "C" dp_status_t dp_send(const void *buf, size_t bytes, int dest, int tag,
                               dp_team_t *team) {
    return send_and_wait(dp_isend, buf, bytes, dest, tag, team);
}

extern "C" dp_status_t dp_ssend(const void *buf, size_t bytes, int dest, int tag,
                                dp_team_t *team) {
    return send_and_wait(dp_issend, buf, bytes, dest, tag, team);
}

extern "C" dp_status_t dp_recv(void *buf, size_t bytes, int source, int tag, dp_team_t *team,
                               dp_msg_status_t *status) {
    dp_request_t *req = nullptr;
    DP_CHECK(dp_irecv(buf, bytes, source, tag, team, &req));
    const dp_status_t s = dp_wait(req);
    if (status && (s == DP_OK || s == DP_ERR_TRUNCATED))
        deputy::client::message_status(*reinterpret_cast<Request *>(req)->record, status);
    dp_request_free(req);
    return s;
}

extern "C" dp_status_t dp_request_status(dp_request_t *req, dp_msg_status_t *status) {
    if (req == nullptr || status == nullptr) return DP_ERR_INVALID;
    const Request *r = reinterpret_cast<const Request *>(req);
    if (!r->p2p || r->p2p_opcode != ch::kP2pRecv)
        DP_FAIL(DP_ERR_INVALID, "dp_request_status: the request is not a receive");
    const uint8_t st = __atomic_load_n(&r->record->status, __ATOMIC_ACQUIRE);
    if (st == DP_COMP_PENDING)
        DP_FAIL(DP_ERR_INVALID, "dp_request_status: the receive has not completed");
    if (st != DP_COMP_SUCCESS && st != ch::kP2pTruncated)
        DP_FAIL(DP_ERR_INVALID, "dp_request_status: the receive failed ({}): no message",
                ch::coll_status_name(st));
    deputy::client::message_status(*r->record, status);
    return DP_OK;
}

extern "C" dp_status_t dp_iprobe(int source, int tag, dp_team_t *team, int *flag,
                                 dp_msg_status_t *status) {
    if (flag == nullptr) return DP_ERR_INVALID;
    *flag = 0;
    DP_CHECK(check("dp_iprobe", false, nullptr, 0, source, tag, team));
    TeamP2p *p2p = nullptr;
    DP_CHECK(team->impl->p2p(&p2p));
    return p2p->probe(source, tag, flag, status);
}

extern "C" dp_status_t dp_probe(int source, int tag, dp_team_t *team, dp_msg_status_t *status) {
    for (;;) {
        int flag = 0;
        DP_CHECK(dp_iprobe(source, tag, team, &flag, status));
        if (flag) return DP_OK;
        // Each look is a round trip to the agent: leave the CPU between them
        // to whoever will send the message.
        sched_yield();
    }
}
