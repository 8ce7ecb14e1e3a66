// Descriptors from the clients' rings to the engines: polling the rings,
// telling clients when the agent sleeps (so they ring its doorbell) and the
// polling order. Separate from the loop: this is the data path of every client.
#include <cstring>

#include "agent/agent.h"
#include "channel/coll_post.h"
#include "channel/p2p_post.h"
#include "common/timing.h"

namespace deputy::agent {

namespace {

// Descriptors taken from one client per turn, so one busy client cannot
// starve the others.
constexpr int kDescriptorsPerTurn = 32;

template <typename Post>
Post decoded(const dp_desc_t &slot) {
    static_assert(sizeof(Post) == sizeof(dp_desc_t));
    Post p;
    std::memcpy(&p, &slot, sizeof p);
    return p;
}

}  // namespace

void Agent::rebuild_attached() {
    attached_.clear();
    for (auto &[id, s] : clients_)
        if (s->state == ClientSession::State::kAttached) attached_.push_back(s.get());
}

void Agent::set_sleeping(bool sleeping) {
    if (sleeping == sleeping_) return;
    sleeping_ = sleeping;
    for (ClientSession *s : attached_)
        s->header->agent_sleeping.store(sleeping ? 1 : 0, std::memory_order_relaxed);
}

bool Agent::any_ring_nonempty() const {
    const uint64_t now = timing::now_ns();
    for (const ClientSession *s : attached_)
        if (pending_soon(*s, now) || s->ring.maybe_nonempty()) return true;
    return false;
}

bool Agent::poll_rings() {
    bool worked = false;
    for (ClientSession *s : attached_) {
        ClientSpace &space = s->space();
        for (int k = 0; k < kDescriptorsPerTurn; ++k) {
            dp_desc_t d;
            if (s->pending) d = *s->pending;
            else if (!s->ring.pop(&d)) break;
            // A team's post (its opcode's range says which kind): the
            // slot's copy, decoded as that post, to the team engine.
            if (channel::is_p2p_post(d.opcode)) {
                s->pending.reset();
                teams_->post_p2p(*s, decoded<channel::P2pPost>(d));
                worked = true;
                continue;
            }
            if (channel::is_coll_post(d.opcode)) {
                s->pending.reset();
                teams_->post(*s, decoded<channel::CollPost>(d));
                worked = true;
                continue;
            }
            // Every descriptor goes to the engines, under the client's own
            // address space, whatever memory it names (client_space.h), as
            // long as the client is within its share (may_submit). A DRAIN
            // waits here for the client's own earlier work, never on an
            // engine for the queue's: another client may hold that.
            if (!space.may_submit() || (d.opcode == DP_OP_DRAIN && !space.quiet())) {
                if (!s->pending) s->pending_since_ns = timing::now_ns();
                s->pending = d;
                break;
            }
            space.submitted(d);
            if (device_->submit(s->wq, d, s->pasid) == DP_ERR_RETRY) {
                space.finished(d);
                if (!s->pending) s->pending_since_ns = timing::now_ns();
                s->pending = d;  // the device queue is full: keep it, try again later
                break;
            }
            s->pending.reset();
            worked = true;
            ++s->counters.forwarded;
            ++counters_.forwarded;
        }
    }
    return worked;
}

void Agent::take_team_posts(ClientSession &s) {
    // Its leave came through the socket, its posts through the ring: those
    // it made before leaving are taken first (a member that matched its
    // messages itself may leave before the agent looked at its ring).
    while (!s.pending) {
        dp_desc_t d;
        if (!s.ring.pop(&d)) break;
        if (channel::is_p2p_post(d.opcode)) {
            teams_->post_p2p(s, decoded<channel::P2pPost>(d));
        } else if (channel::is_coll_post(d.opcode)) {
            teams_->post(s, decoded<channel::CollPost>(d));
        } else {
            // The engines' work: the loop submits it in order, as ever.
            s.pending_since_ns = timing::now_ns();
            s.pending = d;
        }
    }
}

void Agent::on_doorbell(uint32_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    uint64_t count;
    // Reset the eventfd; the rings are polled by the loop anyway.
    [[maybe_unused]] ssize_t n = ::read(it->second->doorbell.get(), &count, sizeof(count));
}

}  // namespace deputy::agent
