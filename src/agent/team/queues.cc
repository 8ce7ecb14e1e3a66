// A team's queues: each member's posts in its order (a vector collective's
// counts block copied as its post arrives), the next operation taken when
// every local member has a head, the records published, and what a broken
// team fails.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"

namespace deputy::agent {

namespace ch = channel;

void TeamEngine::post(ClientSession &s, const channel::CollPost &d) {
    uint32_t rank = 0;
    Team *t = find_member_team(s, d.team, &rank);
    if (!t) {
        DP_LOG_LIMITED(s.space().log(), "client {}: {} for team {}, of which it is not a member",
                       s.id, collective_name_of(d), d.team);
        publish(s.id, d.completion, DP_COMP_INVALID_FIELD, 0, d.sequence);
        return;
    }
    // Its operation's sequence: the count of the member's posts, as the
    // board names operations. (While the team works that is t.ops plus its
    // queue; not once it broke: its queues are emptied, and the members
    // may have run operations the agent never started.)
    Team::Here &member = *t->here_of(rank);
    const uint64_t sequence = member.posts + 1;
    if (t->broken || sequence >= t->broken_from) {
        member.posts = sequence;
        if (claim_for_agent(*t, sequence) != channel::kOwnerRanks)
            publish(s.id, d.completion, channel::kCollMemberLost, 0, d.sequence);
        if (t->board.valid()) t->board.notify();
        return;
    }
    if (member.queue.size() >= config_.max_team_queue) {
        // Its own status, not a refusal of the operation: the member may
        // post it again once some of its queue has run. (A member of a team
        // with a board never gets here unless it ignored the board's bound
        // on posting; its record is then written only if the members have
        // not claimed the operation.)
        if (claim_for_agent(*t, sequence) != channel::kOwnerRanks)
            publish(s.id, d.completion, channel::kCollQueueFull, 0, d.sequence);
        if (t->board.valid()) t->board.notify();  // its members sleep on the board, not the record
        return;
    }
    Posted p;
    p.post = d;
    const auto c = collective_of(d);
    if (c && coll::is_vector(*c)) {
        // A member's copies are bounded in bytes too: a team of thousands
        // has counts blocks of a hundred KiB and more.
        if (member.counts_bytes + d.counts_bytes > config_.max_queued_counts_bytes) {
            DP_LOG_LIMITED(s.space().log(),
                           "client {}: {} on team '{}': its queued counts blocks would hold {} "
                           "bytes at the agent (max_queued_counts_bytes = {}); post it again "
                           "once some have run",
                           s.id, collective_name_of(d), t->key,
                           member.counts_bytes + d.counts_bytes, config_.max_queued_counts_bytes);
            if (claim_for_agent(*t, sequence) != channel::kOwnerRanks)
                publish(s.id, d.completion, channel::kCollQueueFull, 0, d.sequence);
            if (t->board.valid()) t->board.notify();
            return;
        }
        copy_counts(s, *t, &p);
        member.counts_bytes += p.counts.size();
    }
    member.posts = sequence;
    member.queue.push_back(std::move(p));
    try_start(*t);
}

void TeamEngine::copy_counts(ClientSession &s, const Team &t, Posted *p) {
    const channel::CollPost &d = p->post;
    // Only the team's length is ever copied (32 bytes per member), within
    // the member's max_queued_counts_bytes (post()).
    if (d.counts_bytes != coll::vector_counts_bytes(t.size)) {
        DP_LOG_LIMITED(s.space().log(),
                       "client {}: {} on team '{}' with a {}-byte counts block; a team of {} "
                       "needs {}",
                       s.id, collective_name_of(d), t.key, d.counts_bytes, t.size,
                       coll::vector_counts_bytes(t.size));
        p->counts_status = DP_COMP_INVALID_FIELD;
        return;
    }
    const void *block = s.space().translate(d.counts, d.counts_bytes, mover::Access::read);
    if (!block) {
        DP_LOG_LIMITED(s.space().log(),
                       "client {}: {} on team '{}': counts block [0x{:x}, +{}) is outside its "
                       "pool",
                       s.id, collective_name_of(d), t.key, d.counts, d.counts_bytes);
        p->counts_status = DP_COMP_ADDRESS_DENIED;
        return;
    }
    const auto *bytes = static_cast<const uint8_t *>(block);
    p->counts.assign(bytes, bytes + d.counts_bytes);
}

void TeamEngine::try_start(Team &t) {
    // An operation that finishes as it starts (inline, a barrier) calls
    // finish(), which calls this again: the loop below takes the next head,
    // not a recursion as deep as the queue.
    if (t.starting) return;
    t.starting = true;
    struct Done {
        Team &t;
        ~Done() { t.starting = false; }
    } done{t};
    while (!t.running && !t.broken) {
        if (members_running(t)) return;  // progress() looks again
        if (t.ops + 1 >= t.broken_from) {  // broken elsewhere from here on
            break_team(t, t.broken_reason);
            return;
        }
        for (const Team::Here &h : t.here)
            if (h.queue.empty()) return;
        std::vector<Posted> &heads = t.next;  // not re-entered: t.starting
        heads.resize(t.size);
        for (size_t i = 0; i < t.here.size(); ++i) {
            Team::Here &h = t.here[i];
            Posted &head = heads[t.local_ranks[i]];
            head = std::move(h.queue.front());
            h.queue.pop_front();
            h.counts_bytes -= head.counts.size();
        }
        if (t.spans_nodes) start_nodes(t, std::move(heads));
        else start_local(t, heads);
    }
}

void TeamEngine::fail_all(const std::vector<channel::CollPost> &heads, Team &t, uint8_t status) {
    for (size_t i = 0; i < t.here.size(); ++i) {
        const channel::CollPost &h = heads[t.local_ranks[i]];
        publish(t.here[i].client, h.completion, status, 0, h.sequence);
    }
    ++failed_ops_;
    finished_on_board(t);
}

void TeamEngine::publish(uint32_t client_id, uint64_t record, uint8_t status, uint64_t bytes,
                         uint64_t user) {
    ClientSession *c = client_id ? hooks_.find_client(client_id) : nullptr;
    if (!c) return;
    mover::OpResult result;
    result.status = status;
    result.bytes = bytes;
    // In place only: the service thread never calls into a client's process.
    if (!c->space().publish_in_place(record, result, user))
        DP_LOG_LIMITED(c->space().log(),
                       "client {}: collective completion record 0x{:x} is misaligned or outside "
                       "its pool and shared heap; the result cannot be reported",
                       c->id, record);
}

void TeamEngine::break_team(Team &t, const std::string &why) {
    if (!t.broken) {
        t.broken = true;
        t.broken_reason = why;
        // Members running an operation stop waiting for the others.
        if (t.board.valid()) t.board.set_broken();
        // The other nodes' agents break it too, from the first operation
        // this node has not started: the one running here goes on (it
        // holds the memory it uses), and so does its step between agents.
        // (Not when another node broke it from there already.)
        if (t.spans_nodes && t.ops + 1 < t.broken_from) internode_->broken(t.uid, t.ops + 1, why);
    }
    for (Team::Here &h : t.here) {
        // Position p of the queue is operation t.ops + p + 1; one the members
        // claimed is theirs to fail (and one a member scribbled on is
        // nobody's: the agent fails it, or its members would wait forever).
        uint64_t seq = t.ops;
        for (const Posted &p : h.queue) {
            if (claim_for_agent(t, ++seq) == channel::kOwnerRanks) continue;
            publish(h.client, p.post.completion, channel::kCollMemberLost, 0, p.post.sequence);
            ++failed_ops_;
        }
        h.queue.clear();
        h.counts_bytes = 0;
    }
    if (t.board.valid()) t.board.notify();
}

void TeamEngine::fail_queued_from(Team &t, uint64_t from) {
    for (Team::Here &h : t.here) {
        auto &q = h.queue;
        // Position p of the queue is operation t.ops + p + 1.
        const uint64_t keep = from > t.ops + 1 ? from - t.ops - 1 : 0;
        while (q.size() > keep) {
            publish(h.client, q.back().post.completion, channel::kCollMemberLost, 0,
                    q.back().post.sequence);
            ++failed_ops_;
            h.counts_bytes -= q.back().counts.size();
            q.pop_back();
        }
    }
}

}  // namespace deputy::agent
