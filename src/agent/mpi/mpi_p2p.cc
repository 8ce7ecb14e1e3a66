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
    std::vector<uint8_t> &bytes = *c.bytes;
    auto failed = [&](int rc, const char *what) {
        DP_LOG_WARN("agent node {}: point-to-point {} node {} failed: {}", node_, what, c.node,
                    mpi_error(rc));
    };
    switch (c.kind) {
        case Command::Kind::p2p_head: {
            P2pSend s;
            s.requests.resize(1);
            // Heads and eager messages are small (config: p2p_node_eager_bytes).
            const int rc = MPI_Isend(bytes.data(), int(bytes.size()), MPI_BYTE, int(c.node),
                                     kHeadTag, p2p_, &s.requests[0]);
            if (rc != MPI_SUCCESS) return failed(rc, "head to");
            ++p2p_heads_sent_;
            s.bytes = std::move(c.bytes);
            p2p_sends_.push_back(std::move(s));
            return;
        }
        case Command::Kind::p2p_data_send: {
            P2pSend s;
            s.data = true;
            const size_t pieces = pieces_of(bytes.size());
            for (size_t i = 0; i < pieces; ++i) {
                const size_t at = i * kPieceBytes;
                const size_t n = std::min(kPieceBytes, bytes.size() - std::min(at, bytes.size()));
                MPI_Request r;
                const int rc = MPI_Isend(bytes.data() + at, int(n), MPI_BYTE, int(c.node),
                                         kDataTagBase + int(c.slot), p2p_, &r);
                // The receiver waits for every piece: a piece that cannot go
                // is a node lost, which the receiver learns of otherwise.
                if (rc != MPI_SUCCESS) return failed(rc, "data to");
                s.requests.push_back(r);
            }
            p2p_data_bytes_ += bytes.size();
            s.bytes = std::move(c.bytes);
            p2p_sends_.push_back(std::move(s));
            return;
        }
        case Command::Kind::p2p_data_receive: {
            P2pReceive r;
            r.id = c.uid;
            r.node = c.node;
            const size_t pieces = pieces_of(bytes.size());
            for (size_t i = 0; i < pieces; ++i) {
                const size_t at = i * kPieceBytes;
                const size_t n = std::min(kPieceBytes, bytes.size() - std::min(at, bytes.size()));
                MPI_Request q;
                const int rc = MPI_Irecv(bytes.data() + at, int(n), MPI_BYTE, int(c.node),
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
            r.into = std::move(c.bytes);
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
        it = p2p_sends_.erase(it);
    }
    for (auto it = p2p_receives_.begin(); it != p2p_receives_.end();) {
        P2pReceive &r = *it;
        // Piece by piece, in order: a short one (the sender withdrew the
        // message: an empty piece) ends the receive, the rest cancelled.
        bool finished = true;
        for (size_t i = 0; i < r.requests.size(); ++i) {
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
        e.comp_status = r.short_piece ? uint8_t(channel::kCollMemberLost) : uint8_t(DP_COMP_SUCCESS);
        if (r.short_piece) e.reason = "the sender's node withdrew the message";
        else p2p_data_bytes_ += r.into->size();
        e.bytes = std::move(r.into);
        push_event(std::move(e));
        it = p2p_receives_.erase(it);
    }
    return progressed;
}

bool MpiInternode::p2p_in_flight() const { return !p2p_sends_.empty() || !p2p_receives_.empty(); }

bool MpiInternode::p2p_data_moving() const {
    if (!p2p_receives_.empty()) return true;
    for (const P2pSend &s : p2p_sends_)
        if (s.data) return true;
    return false;
}

}  // namespace deputy::agent
