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

uint8_t TeamEngine::bind_members(Team &t, Execution &ex) {
    const channel::CollPost &h0 = ex.heads[t.local_ranks.front()];
    const uint64_t esize = mover::dtype_size(h0.dtype);
    ex.buffers.members.assign(t.size, {});
    for (uint32_t r : t.local_ranks) {
        ClientSession *c = hooks_.find_client(t.members[r]);
        if (!c) return channel::kCollMemberLost;
        const ClientSpace &space = c->space();
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
        ex.buffers.members[r] = {&space, h.src, h.dst};
        if ((need.source && !space.in_pool(h.src, need.source)) ||
            (need.destination && !space.in_pool(h.dst, need.destination)))
            ex.buffers.through_process = true;
        ex.memories.push_back(c->memory);
        ex.bytes = std::max(ex.bytes, need.destination);
    }
    return 0;
}

void TeamEngine::start(Team &t, std::vector<channel::CollPost> heads) {
    ++t.ops;
    if (uint8_t bad = check_heads(t, heads)) return fail_all(heads, t, bad);
    auto ex = std::make_unique<Execution>();
    ex->heads = std::move(heads);
    const channel::CollPost &h0 = ex->heads[0];
    ex->collective = *collective_of(h0);
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
    ex->plan = coll::build_local_plan(args);
    if (ex->plan.traffic_bytes() <= config_.coll_inline_bytes) {
        // Small: cheaper here than the wake-ups of a hand-off to an engine
        // (bounded by coll_inline_bytes, so no client waits long for it).
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
    if (status == DP_COMP_SUCCESS) {
        ++completed_ops_;
        bytes_ += ex->bytes;
    } else {
        ++failed_ops_;
        DP_LOG_WARN("agent: team '{}' {} failed: {}{}", t.key, coll::collective_name(ex->collective),
                    channel::coll_status_name(status), why.empty() ? "" : " (" + why + ")");
    }
    try_start(t);
}

}  // namespace deputy::agent
