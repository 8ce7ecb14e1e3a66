// A collective among members of one node, from agreed heads to the last
// record: checks, the plan (coll/local_plan.h), its tasks on the engines a
// window at a time (agent/coll_tasks.h), and the members' records.
#include <fmt/format.h>

#include <algorithm>

#include "agent/team_engine.h"
#include "agent/team_engine_state.h"
#include "common/log.h"

namespace deputy::agent {

uint8_t TeamEngine::check_heads(Team &t, const std::vector<channel::CollPost> &heads) {
    const uint32_t first = t.local_ranks.front();
    const channel::CollPost &h0 = heads[first];
    for (uint32_t r : t.local_ranks) {
        const std::string diff = head_difference(h0, heads[r]);
        if (diff.empty()) continue;
        DP_LOG_WARN("agent: team '{}' operation {}: ranks {} and {} disagree: {}", t.key, t.ops,
                    first, r, diff);
        return channel::kCollMismatch;
    }
    return head_invalid(h0, t.size);
}

namespace {

uint8_t vector_status(dp_status_t s) {
    switch (s) {
        case DP_OK: return 0;
        case DP_ERR_DENIED: return DP_COMP_ADDRESS_DENIED;
        case DP_ERR_TOO_LARGE: return DP_COMP_INVALID_SIZE;
        default: return DP_COMP_INVALID_FIELD;
    }
}

}  // namespace

uint8_t TeamEngine::check_vectors(Team &t, Execution &ex, const std::vector<Posted> &posted) {
    if (!coll::is_vector(ex.collective)) return 0;
    const uint64_t esize = mover::dtype_size(ex.heads[t.local_ranks.front()].dtype);
    ex.vectors.assign(t.size, {});
    std::vector<const coll::MemberVector *> present(t.size, nullptr);
    for (uint32_t r : t.local_ranks) {
        const Posted &p = posted[r];
        if (p.counts_status) return p.counts_status;  // logged when the post arrived
        std::string why;
        const dp_status_t s =
            coll::decode_collective_counts(ex.collective, p.counts.data(), p.counts.size(),
                                           t.size, esize, kMaxCollBytes, &ex.vectors[r], &why);
        if (s != DP_OK) {
            DP_LOG_WARN("agent: team '{}' {}: rank {}'s counts: {}", t.key,
                        coll::collective_name(ex.collective), r, why);
            return vector_status(s);
        }
        present[r] = &ex.vectors[r];
    }
    const std::string diff = coll::vector_difference(present);
    if (!diff.empty()) {
        DP_LOG_WARN("agent: team '{}' operation {}: {}: {}", t.key, t.ops,
                    coll::collective_name(ex.collective), diff);
        return channel::kCollMismatch;
    }
    return 0;
}

uint8_t TeamEngine::bind_members(Team &t, Execution &ex) {
    const channel::CollPost &h0 = ex.heads[t.local_ranks.front()];
    const uint64_t esize = mover::dtype_size(h0.dtype);
    const bool vector = coll::is_vector(ex.collective);
    ex.buffers.members.assign(t.size, {});
    for (uint32_t r : t.local_ranks) {
        ClientSession *c = hooks_.find_client(t.members[r]);
        if (!c) return channel::kCollMemberLost;
        const ClientSpace &space = c->space();
        if (vector) {
            if (uint8_t bad = bind_vector_member(t, ex, r, space)) return bad;
            ex.memories.push_back(c->memory);
            continue;
        }
        const coll::MemberBytes need =
            coll::member_bytes(ex.collective, h0.count, esize, t.size, r, h0.root);
        auto reachable = [&](uint64_t addr, uint64_t bytes) {
            return bytes == 0 || space.in_pool(addr, bytes) || space.direct_allows(addr, bytes);
        };
        const channel::CollPost &h = ex.heads[r];
        if (!reachable(h.src, need.source) || !reachable(h.dst, need.destination)) {
            const bool src_ok = reachable(h.src, need.source);
            DP_LOG_LIMITED(space.log(),
                           "agent: team '{}' {}: rank {}'s {} [0x{:x}, +{}) is outside its pool "
                           "and registered memory",
                           t.key, coll::collective_name(ex.collective), r,
                           src_ok ? "destination" : "source", src_ok ? h.dst : h.src,
                           src_ok ? need.destination : need.source);
            return DP_COMP_ADDRESS_DENIED;
        }
        // A collective without an in-place form (bcast has one buffer by
        // design) would read what its own tasks write: refused.
        if (ex.collective != coll::Collective::bcast && !coll::has_in_place(ex.collective) &&
            coll::ranges_overlap(h.src, need.source, h.dst, need.destination)) {
            DP_LOG_LIMITED(space.log(),
                           "agent: team '{}' {}: rank {}'s source and destination overlap (there "
                           "is no in-place form)",
                           t.key, coll::collective_name(ex.collective), r);
            return DP_COMP_INVALID_FIELD;
        }
        ex.buffers.members[r] = {&space, h.src, h.dst};
        if ((need.source && !space.in_pool(h.src, need.source)) ||
            (need.destination && !space.in_pool(h.dst, need.destination)))
            ex.buffers.through_process = true;
        ex.memories.push_back(c->memory);
        ex.bytes = std::max(ex.bytes, need.destination);
    }
    return 0;
}

uint8_t TeamEngine::bind_vector_member(Team &t, Execution &ex, uint32_t r,
                                       const ClientSpace &space) {
    const channel::CollPost &h = ex.heads[r];
    const coll::MemberVector &v = ex.vectors[r];
    // alltoallv has no in-place form; the other vector collectives' own
    // block moves nowhere in place (its counts say 0), so a member's source
    // may lie in its destination: what it reads there no member writes
    // (the blocks others write are its receive blocks, which the counts
    // place), and a member that lies about that spoils its own buffer.
    if (!coll::has_in_place(ex.collective) && h.src == h.dst && (v.send_total || v.recv_total)) {
        DP_LOG_LIMITED(space.log(), "agent: team '{}' {}: rank {} gave one buffer as source and "
                       "destination (there is no in-place form)",
                       t.key, coll::collective_name(ex.collective), r);
        return DP_COMP_INVALID_FIELD;
    }
    bool through_process = false;
    for (int side = 0; side < 2; ++side) {
        const uint64_t base = side == 0 ? h.src : h.dst;
        const std::vector<coll::VectorBlock> &blocks = side == 0 ? v.send : v.recv;
        for (uint32_t m = 0; m < t.size; ++m) {
            const coll::VectorBlock &b = blocks[m];
            if (b.bytes == 0) continue;
            uint64_t addr;
            const bool wraps = __builtin_add_overflow(base, b.offset, &addr) ||
                               addr + b.bytes < addr;
            const bool in_pool = !wraps && space.in_pool(addr, b.bytes);
            if (!in_pool && (wraps || !space.direct_allows(addr, b.bytes))) {
                DP_LOG_LIMITED(space.log(),
                               "agent: team '{}' {}: rank {}'s {} block {} [0x{:x} + {}, +{}) is "
                               "outside its pool and registered memory",
                               t.key, coll::collective_name(ex.collective), r,
                               side == 0 ? "source" : "destination", m, base, b.offset, b.bytes);
                return DP_COMP_ADDRESS_DENIED;
            }
            through_process |= !in_pool;
        }
    }
    ex.buffers.members[r] = {&space, h.src, h.dst};
    ex.buffers.through_process |= through_process;
    ex.bytes = std::max(ex.bytes, v.recv_total);
    return 0;
}

void TeamEngine::start(Team &t, const std::vector<Posted> &posted) {
    ++t.ops;
    std::unique_ptr<Execution> ex = t.spare ? std::move(t.spare) : std::make_unique<Execution>();
    ex->heads.resize(t.size);
    for (uint32_t r : t.local_ranks) ex->heads[r] = posted[r].post;
    if (t.board.valid()) {
        if (t.ops == 1) close_board(t);
        t.board.header().agent_started.store(t.ops, std::memory_order_release);
        // Who runs it: the claim word is the members' to write too, so it
        // is read once, and one that names nobody fails the operation
        // (its members would otherwise wait for records nobody writes).
        const channel::BoardOwner owner = claim_for_agent(t, t.ops);
        // The board names operations by the members' count of their posts.
        // A member whose count is not the agent's (it is not the library)
        // would have its teammates run another operation than the agent's
        // under the same name: from here on the agent runs them all. (No
        // later operation can be claimed for the ranks yet: this one has
        // not finished. A member leaving its wait may have claimed later
        // ones for the agent, which changes nothing here.)
        if (!t.board.header().agent_only.load(std::memory_order_acquire))
            for (uint32_t r : t.local_ranks) {
                if (ex->heads[r].sequence + 1 == t.ops) continue;
                const std::string why = fmt::format(
                    "rank {} of team '{}' numbers its post {}; the agent counts operation {}", r,
                    t.key, ex->heads[r].sequence + 1, t.ops);
                if (owner != channel::kOwnerAgent) {
                    // The members ran some other operation under this name
                    // (their records are theirs), or nobody runs it.
                    DP_LOG_WARN("agent: {}", why);
                    if (owner != channel::kOwnerRanks)
                        fail_all(ex->heads, t, channel::kCollMemberLost);
                    return break_team(t, why);
                }
                DP_LOG_WARN("agent: {}: the agent runs the team's operations from now on", why);
                t.board.header().agent_only.store(1, std::memory_order_release);
                break;
            }
        if (owner == channel::kOwnerRanks) {
            ++rank_ops_;  // theirs, records included; the next waits for it (try_start)
            t.spare = std::move(ex);
            return;
        }
        if (owner != channel::kOwnerAgent) {
            fail_all(ex->heads, t, channel::kCollMemberLost);
            return break_team(t, fmt::format("team '{}': operation {} has a claim no one "
                                             "could have made on its board",
                                             t.key, t.ops));
        }
    }
    if (uint8_t bad = check_heads(t, ex->heads)) return fail_all(ex->heads, t, bad);
    const channel::CollPost &h0 = ex->heads[0];
    ex->collective = *collective_of(h0);
    if (uint8_t bad = check_vectors(t, *ex, posted)) return fail_all(ex->heads, t, bad);
    if (uint8_t bad = bind_members(t, *ex)) return fail_all(ex->heads, t, bad);
    coll::LocalArgs args;
    args.collective = ex->collective;
    args.size = t.size;
    args.count = h0.count;
    args.dtype = dp_dtype_t(h0.dtype);
    args.op = coll::reduces(ex->collective) ? dp_op_t(h0.redop) : DP_SUM;
    args.root = h0.root;
    args.chunk_bytes = ex->buffers.all_in_place() ? config_.coll_chunk_bytes
                                                  : config_.coll_direct_chunk_bytes;
    args.vectors = &ex->vectors;
    if (coll::is_vector(args.collective) || ex->planned_for != args) {
        ex->plan = coll::build_local_plan(args);
        ex->planned_for.reset();
        if (!coll::is_vector(args.collective)) ex->planned_for = args;
    }
    if (ex->plan.traffic_bytes() <= config_.coll_inline_bytes && ex->buffers.all_in_place()) {
        // Small: cheaper here than the wake-ups of a hand-off to an engine
        // (bounded by coll_inline_bytes, so no client waits long for it).
        // Only over mapped memory: a call into a member's process takes as
        // long as the process likes (userfaultfd), and the service thread
        // serves everyone; engines can be relieved (mover/stall_watch.h).
        uint8_t status = DP_COMP_SUCCESS;
        std::string why;
        for (const coll::Task &task : ex->plan.tasks)
            if ((status = coll::run_task(ex->plan, task, ex->buffers, &why)) != DP_COMP_SUCCESS)
                break;
        t.running = std::move(ex);
        finish(t, status, why);
        return;
    }
    ex->tasks.reset(&ex->plan, {}, 1, &ex->buffers);
    ex->tasks.enable_all();
    t.running = std::move(ex);
    advance(t);
}

bool TeamEngine::advance(Team &t) {
    Execution &ex = *t.running;
    ex.tasks.poll();
    if (ex.tasks.done() || (ex.tasks.failed() && ex.tasks.idle())) {
        finish(t, ex.tasks.status(), ex.tasks.why());
        return true;
    }
    ex.tasks.pump(*device_, 0, task_pasid_, window());
    return false;
}

void TeamEngine::finish(Team &t, uint8_t status, const std::string &why) {
    std::unique_ptr<Execution> ex = std::move(t.running);
    // A member that died while its memory was being read or written makes
    // the copy fail: that is a lost member, not a bad address (its pidfd
    // tells, before the session is dropped).
    if (status != DP_COMP_SUCCESS && status != channel::kCollMismatch && ex->buffers.member_gone())
        status = channel::kCollMemberLost;
    for (uint32_t r : t.local_ranks)
        publish(t.members[r], ex->heads[r].completion, status, ex->bytes, ex->heads[r].sequence);
    finished_on_board(t);
    if (status == DP_COMP_SUCCESS) {
        ++completed_ops_;
        bytes_ += ex->bytes;
    } else {
        ++failed_ops_;
        DP_LOG_WARN("agent: team '{}' {} failed: {}{}", t.key, coll::collective_name(ex->collective),
                    channel::coll_status_name(status), why.empty() ? "" : " (" + why + ")");
    }
    if (!ex->spans_nodes && ex->idle()) {
        ex->recycle();
        t.spare = std::move(ex);
    }
    try_start(t);
}

}  // namespace deputy::agent
