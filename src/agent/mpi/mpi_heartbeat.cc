// Heartbeats between agents: every node sends an empty message to every
// other a few times per node timeout, on a tag of the point-to-point
// communicator. Collectives' steps time out by themselves; a receive of a
// message from another node's member has no step and no end, so a node
// that died (its agent killed, its host gone) is found here: silent for
// op_timeout_ms, it is declared lost, its members gone for point-to-point
// (node_lost) and every team it was in broken for collectives.
#include <fmt/format.h>

#include <algorithm>

#include "agent/mpi/mpi_internode.h"
#include "agent/mpi/mpi_internode_state.h"
#include "channel/coll_post.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::agent {
namespace {

constexpr int kAliveTag = 2;
// Heartbeats per node timeout: one or two lost to a busy node thread do
// not make a node lost.
constexpr uint64_t kAlivePerTimeout = 4;

}  // namespace

bool MpiInternode::heartbeat() {
    const uint64_t now = timing::now_ns();
    if (heard_ns_.empty()) {
        heard_ns_.assign(nodes_, now);
        alive_sends_.assign(nodes_, MPI_REQUEST_NULL);
        lost_.assign(nodes_, 0);
    }
    bool progressed = false;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, kAliveTag, p2p_, &flag, &st) != MPI_SUCCESS || !flag) break;
        if (MPI_Recv(nullptr, 0, MPI_BYTE, st.MPI_SOURCE, kAliveTag, p2p_, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            break;
        const auto from = uint32_t(st.MPI_SOURCE);
        heard_ns_[from] = now;
        if (lost_[from]) {
            // It was slow, not dead: its teams stay broken, new ones are watched.
            DP_LOG_WARN("agent node {}: node {}, declared lost, is heard from again", node_, from);
            lost_[from] = 0;
        }
    }
    const uint64_t timeout_ns = uint64_t(options_.op_timeout_ms) * 1'000'000;
    if (now >= next_alive_ns_) {
        next_alive_ns_ = now + timeout_ns / kAlivePerTimeout;
        for (uint32_t n = 0; n < nodes_; ++n) {
            if (n == node_ || lost_[n]) continue;
            if (alive_sends_[n] != MPI_REQUEST_NULL) {
                int done = 0;
                MPI_Test(&alive_sends_[n], &done, MPI_STATUS_IGNORE);
                if (!done) continue;  // one in flight per node: never more
            }
            MPI_Isend(nullptr, 0, MPI_BYTE, int(n), kAliveTag, p2p_, &alive_sends_[n]);
        }
    }
    for (uint32_t n = 0; n < nodes_; ++n) {
        if (n == node_ || lost_[n] || now - heard_ns_[n] < timeout_ns) continue;
        lost_[n] = 1;
        progressed = true;
        ++nodes_lost_;
        const std::string why = fmt::format(
            "the agent of node {} fell silent (nothing from it for {} ms: node_timeout_ms)", n,
            options_.op_timeout_ms);
        DP_LOG_WARN("agent node {}: {}", node_, why);
        InternodeEvent e;
        e.kind = InternodeEvent::Kind::node_lost;
        e.node = n;
        e.reason = why;
        push_event(std::move(e));
        // Rendezvous data it was to send: it will not come. Each receive
        // is answered once MPI let go of its buffer (progress_p2p): the
        // buffer may be a member's, and a node declared lost may only be
        // slow, its bytes on the way.
        for (P2pReceive &r : p2p_receives_) {
            if (r.node != n || r.lost_ns) continue;
            for (MPI_Request &q : r.requests)
                if (q != MPI_REQUEST_NULL) MPI_Cancel(&q);
            r.lost_ns = now;
            r.lost_why = why;
        }
        for (auto &[uid, t] : teams_)
            if (std::find(t->nodes.begin(), t->nodes.end(), n) != t->nodes.end())
                on_broken(uid, 0, why);
    }
    return progressed;
}

void MpiInternode::free_heartbeats() {
    // A heartbeat still in flight completes (or not, to a dead node) on
    // its own: MPI_Finalize must not wait for it.
    for (MPI_Request &r : alive_sends_)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

}  // namespace deputy::agent
