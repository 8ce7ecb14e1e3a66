// Teams whose members sit on several nodes: one task graph per operation.
//
// Each node's agent does three stages for its local members
// (coll/node_plan.h), the first and last as tasks on its engines:
//  1. gather: the local members' sources into the agent's buffers (reduced
//     in rank order for the reductions, packed per node for the moves);
//  2. the step between the team's nodes (Internode: MPI, on the agents'
//     own thread);
//  3. write-back of the results into every local member's destination.
// A reduction goes in chunks (groups): the step of chunk k starts as soon
// as the engines gathered chunk k, and chunk k is written back as soon as
// its step returns, while the next chunks are still being gathered.
//
// Every node posts the same sequence of steps for a team, even when its own
// members fail locally (disagreeing heads, a buffer out of range): it then
// posts a "poisoned" check that makes the other nodes fail the operation
// with kCollMismatch instead of waiting for it; a gather that fails still
// posts its steps, and its node fails the operation when they return.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"
#include "mover/names.h"

namespace deputy::agent {

namespace ch = channel;

namespace {

// Reductions go to the other nodes in chunks of this many bytes.
constexpr uint64_t kNodeChunkBytes = 4ull << 20;
// MPI counts are ints: one exchange of moved bytes stays under this.
constexpr uint64_t kMaxStepBytes = INT_MAX;
constexpr uint8_t kPoisonOpcode = 0xff;

InterOp check_of(const ch::CollPost &h) {
    InterOp op;
    op.check = true;
    op.opcode = h.opcode;
    op.dtype = h.dtype;
    op.redop = h.redop;
    op.count = h.count;
    op.root = h.root;
    return op;
}

}  // namespace

void TeamEngine::start_nodes(Team &t, std::vector<Posted> posted) {
    auto ex = std::make_unique<Execution>();
    ex->runner = Execution::Runner::nodes;
    const uint64_t sequence = ++t.ops;
    const uint32_t first_local = t.local_ranks.front();
    const ch::CollPost h0 = posted[first_local].post;
    ex->heads.resize(t.size);
    for (uint32_t r : t.local_ranks) ex->heads[r] = posted[r].post;
    // A local failure: the other nodes must fail too, not wait.
    auto fail_here = [&](uint8_t status) {
        InterOp poison = check_of(h0);
        poison.opcode = kPoisonOpcode;
        poison.count = internode_->node();  // unlike any other node's
        poison.step.kind = coll::NodeExchange::Kind::barrier;
        poison.team_uid = t.uid;
        poison.op_id = next_step_id_++;  // not tracked: its answer is ignored
        poison.sequence = sequence;
        internode_->start(std::move(poison));
        fail_all(ex->heads, t, status);
    };
    if (uint8_t bad = check_heads(t, ex->heads)) return fail_here(bad);
    ex->collective = *collective_of(h0);
    if (uint8_t bad = check_vectors(t, *ex, posted)) return fail_here(bad);
    if (uint8_t bad = bind_members(t, *ex)) return fail_here(bad);
    coll::NodeArgs args;
    args.collective.collective = ex->collective;
    args.collective.size = t.size;
    args.collective.count = h0.count;
    args.collective.dtype = dp_dtype_t(h0.dtype);
    args.collective.op = coll::reduces(ex->collective) ? dp_op_t(h0.redop) : DP_SUM;
    args.collective.root = h0.root;
    args.collective.chunk_bytes = ex->buffers.all_in_place() ? config_.coll_chunk_bytes
                                                             : config_.coll_direct_chunk_bytes;
    args.collective.vectors = &ex->vectors;
    args.node_of_rank = t.node_of_rank;
    args.node = internode_->node();
    args.stage_bytes = kNodeChunkBytes;
    ex->nodes.plan = coll::build_node_plan(args);
    ex->nodes.args = std::move(args);
    const coll::NodePlan &np = ex->nodes.plan;
    // MPI counts are ints.
    const uint64_t moved = std::max(np.send_bytes, np.recv_bytes);
    if (moved > (coll::reduces(ex->collective) ? kMaxStepBytes * 64 : kMaxStepBytes))
        return fail_here(DP_COMP_INVALID_SIZE);
    ex->nodes.send = std::make_shared<std::vector<uint8_t>>(np.send_bytes);
    ex->nodes.recv = std::make_shared<std::vector<uint8_t>>(np.recv_bytes);
    ex->buffers.send = ex->nodes.send->data();
    ex->buffers.send_bytes = np.send_bytes;
    ex->buffers.recv = ex->nodes.recv->data();
    ex->buffers.recv_bytes = np.recv_bytes;
    // alltoallv: what this node's ranks send each node's ranks, for the
    // first step (the counts exchange).
    if (!np.counts_sent.empty())
        std::memcpy(ex->nodes.send->data() + np.counts_send_offset, np.counts_sent.data(),
                    np.counts_sent.size() * sizeof(uint64_t));
    ex->nodes.gather.reset(&np.gather.plan, np.gather.group_of_task, np.gather.groups, &ex->buffers);
    ex->nodes.write_back.reset(&np.write_back.plan, np.write_back.group_of_task, np.write_back.groups,
                         &ex->buffers);
    ex->nodes.gather.enable_all();
    t.running = std::move(ex);
    advance(t);
}

void TeamEngine::post_step(Team &t, uint32_t group) {
    Execution &ex = *t.running;
    const ch::CollPost &h0 = ex.heads[t.local_ranks.front()];
    InterOp o = check_of(h0);
    // A step that waits for the one before may carry what that one
    // brought: it checks again.
    o.check = !ex.nodes.checked || ex.nodes.plan.steps_in_order;
    ex.nodes.checked = true;
    // A plan whose counts never travel has the agents compare their digest.
    if (ex.nodes.plan.check_digest) o.count = ex.nodes.plan.check_digest;
    if (!ex.nodes.plan.vector_steps.empty() && group == 1) {
        // The counts arrived with step 0: a pair that disagrees fails the
        // data step on every node (this node's check differs) before any
        // byte moves; so does a failure here so far (step 0, the gather),
        // so that no node writes back blocks this one never had.
        const std::string diff =
            ex.nodes.status != DP_COMP_SUCCESS
                ? fmt::format("failed here before the data step ({})",
                              ch::coll_status_name(ex.nodes.status))
                : coll::vector_counts_difference(ex.nodes.args, ex.nodes.plan, ex.nodes.recv->data());
        if (!diff.empty()) {
            DP_LOG_WARN("agent: team '{}' operation {}: {}: {}", t.key, t.ops,
                        coll::collective_name(ex.collective), diff);
            o.opcode = kPoisonOpcode;
            o.count = internode_->node();  // unlike any other node's
        }
    }
    o.team_uid = t.uid;
    o.op_id = next_step_id_++;
    o.sequence = t.ops;
    o.step = coll::node_exchange(ex.nodes.args, ex.nodes.plan, group);
    o.send = ex.nodes.send->data();
    o.recv = ex.nodes.recv->data() + o.step.recv_offset;
    ex.nodes.steps[o.op_id] = group;
    ++ex.nodes.steps_posted;
    internode_->start(std::move(o));
}

bool TeamEngine::advance_nodes(Team &t) {
    Execution &ex = *t.running;
    // Gathered chunks go to the other nodes, in order (every node posts the
    // same steps in the same order); a failed gather posts them all the same.
    for (uint32_t group : ex.nodes.gather.poll()) (void)group;
    if (ex.nodes.gather.failed() && ex.nodes.status == DP_COMP_SUCCESS) {
        ex.nodes.status = ex.nodes.gather.status();
        ex.nodes.reason = ex.nodes.gather.why();
    }
    const uint32_t groups = uint32_t(ex.nodes.plan.groups.size());
    while (ex.nodes.steps_posted < groups &&
           (ex.nodes.gather.failed() || ex.nodes.gather.group_done(ex.nodes.steps_posted)) &&
           (!ex.nodes.plan.steps_in_order || ex.nodes.steps_done == ex.nodes.steps_posted))
        post_step(t, ex.nodes.steps_posted);
    ex.nodes.write_back.poll();
    if (ex.nodes.write_back.failed() && ex.nodes.status == DP_COMP_SUCCESS) {
        ex.nodes.status = ex.nodes.write_back.status();
        ex.nodes.reason = ex.nodes.write_back.why();
    }
    const bool steps_done = ex.nodes.steps_done == groups;
    const bool written = ex.nodes.status != DP_COMP_SUCCESS || ex.nodes.write_back.done();
    if (steps_done && written && ex.idle()) {
        if (ex.nodes.status != DP_COMP_SUCCESS) {
            // MPI may still write into the buffers of steps it gave up on.
            if (ex.nodes.status == ch::kCollMemberLost) {
                abandoned_.push_back(ex.nodes.send);
                abandoned_.push_back(ex.nodes.recv);
            }
        }
        finish(t, ex.nodes.status, ex.nodes.reason);
        return true;
    }
    ex.nodes.gather.pump(*device_, 0, task_pasid_, window());
    if (ex.nodes.status == DP_COMP_SUCCESS) ex.nodes.write_back.pump(*device_, 0, task_pasid_, window());
    return false;
}

void TeamEngine::on_step_done(const InternodeEvent &e) {
    auto id = by_uid_.find(e.team_uid);
    if (id == by_uid_.end() || !teams_.count(id->second)) return;
    Team &t = *teams_.at(id->second);
    if (!t.running || !t.running->across_nodes()) return;
    Execution &ex = *t.running;
    auto step = ex.nodes.steps.find(e.op_id);
    if (step == ex.nodes.steps.end()) return;  // a poisoned check's answer
    const uint32_t group = step->second;
    ex.nodes.steps.erase(step);
    ++ex.nodes.steps_done;
    if (!e.algorithm.empty()) ++t.inter_algorithms[e.algorithm];
    if (e.comp_status != DP_COMP_SUCCESS) {
        if (ex.nodes.status == DP_COMP_SUCCESS || ex.nodes.status == DP_COMP_ADDRESS_DENIED) {
            ex.nodes.status = e.comp_status;
            ex.nodes.reason = e.reason;
        }
    } else if (ex.nodes.status == DP_COMP_SUCCESS) {
        ex.nodes.write_back.enable(group);
    }
    advance(t);
}

void TeamEngine::retire(Team &t) {
    // MPI may still write into the buffers of a step in flight.
    if (t.running && t.running->across_nodes()) {
        // Nobody here advances the running operation any more: the other
        // nodes must not wait for steps of it this node has not posted.
        if (t.running->nodes.steps_posted < t.running->nodes.plan.groups.size() && t.ops < t.broken_from)
            internode_->broken(t.uid, t.ops, t.broken_reason);
        if (t.running->nodes.send) abandoned_.push_back(t.running->nodes.send);
        if (t.running->nodes.recv) abandoned_.push_back(t.running->nodes.recv);
    }
    // The engines may still run tasks of it: keep its records and the
    // members' memory until they are done (poll_orphans).
    if (t.running && !t.running->idle()) orphans_.push_back(std::move(t.running));
    drop_p2p(t);
    by_uid_.erase(t.uid);
    retired_uids_.push_back(t.uid);
    if (retired_uids_.size() > 4096) retired_uids_.pop_front();
}

}  // namespace deputy::agent
