// Point-to-point between agents (agent/internode.h, InterMessage): heads
// on one tag of the agents' p2p communicator, so that MPI keeps the order of
// every head from one agent to another; a rendezvous message's bytes on a
// tag of their own per data slot, which the receiving agent chose and posted
// its receive for before it asked for them. Separate from the collectives:
// no team communicator, no order among teams.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <sys/mman.h>

#include "agent/mpi/mpi_internode.h"
#include "agent/mpi/mpi_internode_state.h"
#include "channel/coll_post.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::agent {
namespace {

constexpr int kHeadTag = 1;
constexpr int kDataTagBase = 16;
static_assert(kDataTagBase + int(Internode::kP2pSlots) <= 32767, "MPI_TAG_UB is at least 32767");
// MPI counts are ints: a message's data travels in pieces of at most this.
constexpr size_t kPieceBytes = size_t(1) << 30;

size_t pieces_of(size_t bytes) { return bytes ? (bytes + kPieceBytes - 1) / kPieceBytes : 1; }

}  // namespace

void MpiInternode::p2p_command(Command &c) {
    last_p2p_ns_ = timing::now_ns();
    auto failed = [&](int rc, const char *what) {
        DP_LOG_WARN("agent node {}: point-to-point {} node {} failed: {}", node_, what, c.node,
                    mpi_error(rc));
    };
    switch (c.kind) {
        case Command::Kind::p2p_head: {
            P2pSend s;
            s.requests.resize(1);
            // Heads and eager messages are small (config: p2p_node_eager_bytes).
            std::vector<uint8_t> &head = *c.bytes;
            const int rc = MPI_Isend(head.data(), int(head.size()), MPI_BYTE, int(c.node),
                                     kHeadTag, p2p_, &s.requests[0]);
            if (rc != MPI_SUCCESS) return failed(rc, "head to");
            ++p2p_heads_sent_;
            s.head = std::move(c.bytes);
            p2p_sends_.push_back(std::move(s));
            return;
        }
        case Command::Kind::p2p_data_send: {
            P2pSend s;
            s.sent_id = c.uid;
            s.node = c.node;
            const P2pBytes &bytes = c.data;
            const size_t pieces = pieces_of(bytes.size);
            for (size_t i = 0; i < pieces; ++i) {
                const size_t at = i * kPieceBytes;
                const size_t n = std::min(kPieceBytes, bytes.size - std::min(at, bytes.size));
                MPI_Request r;
                const int rc = MPI_Isend(bytes.data + (n ? at : 0), int(n), MPI_BYTE, int(c.node),
                                         kDataTagBase + int(c.slot), p2p_, &r);
                // The receiver waits for every piece: a piece that cannot go
                // is a node lost, which the receiver learns of otherwise (and
                // the sender's agent by its node_lost event).
                if (rc != MPI_SUCCESS) {
                    failed(rc, "data to");
                    // MPI may still read the pieces that went.
                    s.data = std::move(c.data);
                    abandoned_.push_back(std::move(s.data.owner));
                    return;
                }
                s.requests.push_back(r);
            }
            p2p_data_bytes_ += bytes.size;
            s.data = std::move(c.data);
            p2p_sends_.push_back(std::move(s));
            return;
        }
        case Command::Kind::p2p_data_receive: {
            P2pReceive r;
            r.id = c.uid;
            r.node = c.node;
            r.slot = c.slot;
            const P2pBytes &into = c.data;
            const size_t pieces = pieces_of(into.size);
            for (size_t i = 0; i < pieces; ++i) {
                const size_t at = i * kPieceBytes;
                const size_t n = std::min(kPieceBytes, into.size - std::min(at, into.size));
                MPI_Request q;
                const int rc = MPI_Irecv(into.data + (n ? at : 0), int(n), MPI_BYTE, int(c.node),
                                         kDataTagBase + int(c.slot), p2p_, &q);
                if (rc != MPI_SUCCESS) {
                    for (MPI_Request &earlier : r.requests) {
                        MPI_Cancel(&earlier);
                        MPI_Wait(&earlier, MPI_STATUS_IGNORE);
                    }
                    InternodeEvent e;
                    e.kind = InternodeEvent::Kind::p2p_data;
                    e.op_id = c.uid;
                    e.node = c.node;
                    e.comp_status = channel::kCollMemberLost;
                    e.reason = "MPI refused the receive: " + mpi_error(rc);
                    push_event(std::move(e));
                    return;
                }
                r.requests.push_back(q);
                r.piece_bytes.push_back(n);
            }
            r.into = std::move(c.data);
            p2p_receives_.push_back(std::move(r));
            return;
        }
        case Command::Kind::join:
        case Command::Kind::broken:
        case Command::Kind::start: return;  // not point-to-point (loop())
    }
}

bool MpiInternode::progress_p2p() {
    bool progressed = false;
    // Heads, in the order each agent sent them.
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, kHeadTag, p2p_, &flag, &st) != MPI_SUCCESS || !flag) break;
        int n = 0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        auto bytes = std::make_shared<std::vector<uint8_t>>(size_t(std::max(n, 0)));
        if (MPI_Recv(bytes->data(), n, MPI_BYTE, st.MPI_SOURCE, kHeadTag, p2p_,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        progressed = true;
        last_p2p_ns_ = timing::now_ns();
        ++p2p_heads_received_;
        if (bytes->size() < sizeof(InterMessage)) {
            DP_LOG_WARN("agent node {}: a point-to-point message of {} bytes from node {} is "
                        "shorter than its head; ignored",
                        node_, bytes->size(), st.MPI_SOURCE);
            continue;
        }
        InternodeEvent e;
        e.kind = InternodeEvent::Kind::p2p;
        e.node = uint32_t(st.MPI_SOURCE);
        std::memcpy(&e.message, bytes->data(), sizeof(InterMessage));
        e.bytes = std::move(bytes);
        push_event(std::move(e));
    }
    for (auto it = p2p_sends_.begin(); it != p2p_sends_.end();) {
        int done = 0;
        MPI_Testall(int(it->requests.size()), it->requests.data(), &done, MPI_STATUSES_IGNORE);
        if (!done) {
            ++it;
            continue;
        }
        progressed = true;
        if (it->sent_id) {
            InternodeEvent e;
            e.kind = InternodeEvent::Kind::p2p_sent;
            e.op_id = it->sent_id;
            e.node = node_;
            e.comp_status = DP_COMP_SUCCESS;
            push_event(std::move(e));
        }
        it = p2p_sends_.erase(it);
    }
    for (auto it = p2p_receives_.begin(); it != p2p_receives_.end();) {
        P2pReceive &r = *it;
        bool finished = true;
        if (r.lost_ns) {
            // Its node was lost and its requests cancelled: done once MPI
            // let go of every piece (cancelled, or come whole), as the
            // buffer may be a member's; one that MPI keeps for another
            // node timeout is left to it, and its buffer kept mapped.
            for (size_t i = 0; i < r.requests.size(); ++i) {
                MPI_Request &q = r.requests[i];
                if (q == MPI_REQUEST_NULL) continue;
                int done = 0, cancelled = 0;
                MPI_Status st;
                MPI_Test(&q, &done, &st);
                if (!done) {
                    finished = false;
                    continue;
                }
                MPI_Test_cancelled(&st, &cancelled);
                if (cancelled) {
                    r.short_piece = true;  // (what came is not the message)
                    drain_piece(r.node, r.slot, r.piece_bytes[i]);
                }
            }
            if (!finished &&
                timing::now_ns() - r.lost_ns >= uint64_t(options_.op_timeout_ms) * 1'000'000) {
                for (MPI_Request &q : r.requests)
                    if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
                abandoned_.push_back(std::move(r.into.owner));
                r.short_piece = true;
                finished = true;
            }
        }
        // Piece by piece, in order: a short one (the sender withdrew the
        // message: an empty piece) ends the receive, the rest cancelled.
        for (size_t i = 0; !r.lost_ns && i < r.requests.size(); ++i) {
            if (r.requests[i] == MPI_REQUEST_NULL) continue;
            int done = 0;
            MPI_Status st;
            MPI_Test(&r.requests[i], &done, &st);
            if (!done) {
                finished = false;
                break;
            }
            int got = 0;
            MPI_Get_count(&st, MPI_BYTE, &got);
            if (size_t(got) != r.piece_bytes[i]) {
                r.short_piece = true;
                for (size_t j = i + 1; j < r.requests.size(); ++j) {
                    MPI_Cancel(&r.requests[j]);
                    MPI_Wait(&r.requests[j], MPI_STATUS_IGNORE);
                }
                break;
            }
        }
        if (!finished) {
            ++it;
            continue;
        }
        progressed = true;
        InternodeEvent e;
        e.kind = InternodeEvent::Kind::p2p_data;
        e.op_id = r.id;
        e.node = r.node;
        if (r.lost_ns && r.short_piece) {
            // Its node was lost and MPI let go of the buffer (the receive
            // cancelled; had the bytes all come, it would have succeeded).
            e.comp_status = channel::kCollMemberLost;
            e.reason = r.lost_why;
        } else if (r.short_piece) {
            e.comp_status = channel::kCollMemberLost;
            e.reason = "the sender's node withdrew the message";
        } else {
            e.comp_status = DP_COMP_SUCCESS;
            p2p_data_bytes_ += r.into.size;
        }
        push_event(std::move(e));
        it = p2p_receives_.erase(it);
    }
    free_drains(false);
    return progressed;
}

bool MpiInternode::p2p_in_flight() const { return !p2p_sends_.empty() || !p2p_receives_.empty(); }

bool MpiInternode::p2p_data_moving() const {
    // (Not to or from a node declared lost: its bytes may never come, and
    // the node thread would spin for ever.)
    for (const P2pReceive &r : p2p_receives_)
        if (!r.lost_ns) return true;
    for (const P2pSend &s : p2p_sends_)
        if (!s.head && !lost_[s.node]) return true;
    return false;
}

void MpiInternode::drain_piece(uint32_t node, uint32_t slot, size_t bytes) {
    P2pDrain d;
    d.bytes = bytes;
    if (bytes) {
        d.sink = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (d.sink == MAP_FAILED) {
            DP_LOG_WARN("agent node {}: no address space for a sink of {} bytes for node {}'s "
                        "late data: should it come, it waits in MPI unreceived",
                        node_, bytes, node);
            return;
        }
    }
    if (MPI_Irecv(d.sink, int(bytes), MPI_BYTE, int(node), kDataTagBase + int(slot), p2p_,
                  &d.request) != MPI_SUCCESS) {
        if (d.sink) munmap(d.sink, bytes);
        return;
    }
    p2p_drains_.push_back(d);
}

void MpiInternode::free_drains(bool all) {
    for (auto it = p2p_drains_.begin(); it != p2p_drains_.end();) {
        int done = 0;
        if (all) {
            MPI_Cancel(&it->request);
            MPI_Request_free(&it->request);
            done = 1;
        } else {
            MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
        }
        if (!done) {
            ++it;
            continue;
        }
        // (At the end, MPI may still hold a request it could not cancel:
        // its sink stays mapped.)
        if (it->sink && !all) munmap(it->sink, it->bytes);
        it = p2p_drains_.erase(it);
    }
}

}  // namespace deputy::agent
