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
#include <set>

#include "agent/team_engine.h"
#include "agent/team_engine_state.h"
#include "common/log.h"
#include "mover/names.h"

namespace deputy::agent {
namespace {

namespace ch = channel;

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

std::string TeamEngine::node_key(const SecretDigest &secret, const std::string &key) {
    std::string out;
    for (uint8_t b : secret) out += fmt::format("{:02x}", b);
    return out + "/" + key;
}

std::string TeamEngine::plain_key(const std::string &node_key) {
    const size_t slash = node_key.find('/');
    return slash == std::string::npos ? node_key : node_key.substr(slash + 1);
}

void TeamEngine::join_nodes(ClientSession &s, const ch::control::TeamJoin &m,
                            const SecretDigest &secret) {
    // Across nodes the agents agree on node_key(), so members with
    // different secrets never meet in one team, and two jobs using the
    // same key each form their own.
    const std::string key = node_key(secret, m.key);
    // One rank per client, as on one node (TeamEngine::join).
    for (auto [it, last] = joining_.equal_range(key); it != last; ++it)
        if (it->second.client == s.id) {
            hooks_.send_ready(s, {m.join_id, DP_ERR_INVALID, 0,
                                  fmt::format("team '{}': this client joined it already as rank "
                                              "{} (one rank per client, i.e. per dp_context_t)",
                                              m.key, it->second.rank)}, {});
            return;
        }
    std::set<std::string> keys;
    for (const auto &[k, j] : joining_) keys.insert(k);
    if (!keys.count(key) && keys.size() >= config_.max_forming_teams) {
        hooks_.send_ready(s, {m.join_id, DP_ERR_TOO_LARGE, 0,
                              fmt::format("team '{}': {} teams are forming already "
                                          "(max_forming_teams = {})",
                                          m.key, keys.size(), config_.max_forming_teams)}, {});
        return;
    }
    joining_.insert({key, {s.id, m.rank, m.size, m.join_id}});
    ++pending_[s.id];
    internode_->join(key, m.rank, m.size,
                     m.timeout_ms ? m.timeout_ms : std::min(uint32_t(kDefaultTeamTimeoutMs), config_.max_team_timeout_ms));
}

bool TeamEngine::poll_internode() {
    if (!internode_) return false;
    bool any = false;
    InternodeEvent e;
    while (internode_->poll(&e)) {
        any = true;
        switch (e.kind) {
            case InternodeEvent::Kind::formed: on_formed(e); break;
            case InternodeEvent::Kind::join_failed: on_join_failed(e); break;
            case InternodeEvent::Kind::done: on_step_done(e); break;
            case InternodeEvent::Kind::broken: {
                auto it = by_uid_.find(e.team_uid);
                if (it == by_uid_.end() || !teams_.count(it->second)) break;
                Team &t = *teams_.at(it->second);
                DP_LOG_INFO("agent: team '{}' broken on another node from its operation {}: {}",
                            t.key, e.from_sequence, e.reason);
                t.broken_reason = e.reason;
                t.broken_from = std::min(t.broken_from, e.from_sequence);
                // What was posted for the operations before that stays
                // queued and runs; try_start breaks the team when it gets
                // to the first one after.
                fail_queued_from(t, t.broken_from);
                try_start(t);
                break;
            }
        }
    }
    return any;
}

void TeamEngine::on_formed(const InternodeEvent &e) {
    auto team = std::make_unique<Team>();
    Team &t = *team;
    t.id = next_team_id_++;
    t.key = plain_key(e.key);
    t.size = uint32_t(e.node_of_rank.size());
    t.members.assign(t.size, 0);
    t.join_ids.assign(t.size, 0);
    t.queues.resize(t.size);
    t.posts.assign(t.size, 0);
    t.ready = true;
    t.uid = e.team_uid;
    t.node_of_rank = e.node_of_rank;
    for (uint32_t r = 0; r < t.size; ++r) {
        if (t.node_of_rank[r] == internode_->node()) t.local_ranks.push_back(r);
        else t.spans_nodes = true;
    }
    auto [first, last] = joining_.equal_range(e.key);
    for (auto it = first; it != last;) {
        const PendingJoin &j = it->second;
        if (j.rank < t.size && t.node_of_rank[j.rank] == internode_->node() && !t.members[j.rank]) {
            t.members[j.rank] = j.client;
            t.join_ids[j.rank] = j.join_id;
            unpend(j.client);
            it = joining_.erase(it);
        } else {
            ++it;
        }
    }
    by_uid_[t.uid] = t.id;
    DP_LOG_INFO("agent: team {} '{}' formed across the agents: {} member(s), {} here", t.id, t.key,
                t.size, t.local_ranks.size());
    teams_[t.id] = std::move(team);
    std::string gone;
    for (uint32_t r : t.local_ranks) {
        ClientSession *c = t.members[r] ? hooks_.find_client(t.members[r]) : nullptr;
        if (c) hooks_.send_ready(*c, {t.join_ids[r], DP_OK, t.id, ""}, {});
        else gone = fmt::format("rank {} of team '{}' left before the team formed", r, t.key);
    }
    if (!gone.empty()) break_team(t, gone);
}

void TeamEngine::on_join_failed(const InternodeEvent &e) {
    auto [first, last] = joining_.equal_range(e.key);
    for (auto it = first; it != last;) {
        if (e.rank != UINT32_MAX && it->second.rank != e.rank) {
            ++it;
            continue;
        }
        // The agents name the team by node_key(): members know it by its key.
        std::string reason = e.reason;
        for (size_t at; (at = reason.find(e.key)) != std::string::npos;)
            reason.replace(at, e.key.size(), plain_key(e.key));
        DP_LOG_WARN("agent: {}", reason);
        if (ClientSession *c = hooks_.find_client(it->second.client))
            hooks_.send_ready(*c, {it->second.join_id, e.status, 0, reason}, {});
        unpend(it->second.client);
        it = joining_.erase(it);
    }
}

void TeamEngine::start_nodes(Team &t, std::vector<Posted> posted) {
    auto ex = std::make_unique<Execution>();
    ex->spans_nodes = true;
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
    ex->node_plan = coll::build_node_plan(args);
    ex->node_args = std::move(args);
    const coll::NodePlan &np = ex->node_plan;
    // MPI counts are ints.
    const uint64_t moved = std::max(np.send_bytes, np.recv_bytes);
    if (moved > (coll::reduces(ex->collective) ? kMaxStepBytes * 64 : kMaxStepBytes))
        return fail_here(DP_COMP_INVALID_SIZE);
    ex->send = std::make_shared<std::vector<uint8_t>>(np.send_bytes);
    ex->recv = std::make_shared<std::vector<uint8_t>>(np.recv_bytes);
    ex->buffers.send = ex->send->data();
    ex->buffers.send_bytes = np.send_bytes;
    ex->buffers.recv = ex->recv->data();
    ex->buffers.recv_bytes = np.recv_bytes;
    // alltoallv: what this node's ranks send each node's ranks, for the
    // first step (the counts exchange).
    if (!np.counts_sent.empty())
        std::memcpy(ex->send->data() + np.counts_send_offset, np.counts_sent.data(),
                    np.counts_sent.size() * sizeof(uint64_t));
    ex->gather.reset(&np.gather.plan, np.gather.group_of_task, np.gather.groups, &ex->buffers);
    ex->write_back.reset(&np.write_back.plan, np.write_back.group_of_task, np.write_back.groups,
                         &ex->buffers);
    ex->gather.enable_all();
    t.running = std::move(ex);
    advance_nodes(t);
}

void TeamEngine::post_step(Team &t, uint32_t group) {
    Execution &ex = *t.running;
    const ch::CollPost &h0 = ex.heads[t.local_ranks.front()];
    InterOp o = check_of(h0);
    // A step that waits for the one before may carry what that one
    // brought: it checks again.
    o.check = !ex.checked || ex.node_plan.steps_in_order;
    ex.checked = true;
    // A plan whose counts never travel has the agents compare their digest.
    if (ex.node_plan.check_digest) o.count = ex.node_plan.check_digest;
    if (!ex.node_plan.vector_steps.empty() && group == 1) {
        // The counts arrived with step 0: a pair that disagrees fails the
        // data step on every node (this node's check differs) before any
        // byte moves; so does a failure here so far (step 0, the gather),
        // so that no node writes back blocks this one never had.
        const std::string diff =
            ex.node_status != DP_COMP_SUCCESS
                ? fmt::format("failed here before the data step ({})",
                              ch::coll_status_name(ex.node_status))
                : coll::vector_counts_difference(ex.node_args, ex.node_plan, ex.recv->data());
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
    o.step = coll::node_exchange(ex.node_args, ex.node_plan, group);
    o.send = ex.send->data();
    o.recv = ex.recv->data() + o.step.recv_offset;
    ex.steps[o.op_id] = group;
    ++ex.steps_posted;
    internode_->start(std::move(o));
}

bool TeamEngine::advance_nodes(Team &t) {
    Execution &ex = *t.running;
    // Gathered chunks go to the other nodes, in order (every node posts the
    // same steps in the same order); a failed gather posts them all the same.
    for (uint32_t group : ex.gather.poll()) (void)group;
    if (ex.gather.failed() && ex.node_status == DP_COMP_SUCCESS) {
        ex.node_status = ex.gather.status();
        ex.node_reason = ex.gather.why();
    }
    const uint32_t groups = uint32_t(ex.node_plan.groups.size());
    while (ex.steps_posted < groups &&
           (ex.gather.failed() || ex.gather.group_done(ex.steps_posted)) &&
           (!ex.node_plan.steps_in_order || ex.steps_done == ex.steps_posted))
        post_step(t, ex.steps_posted);
    ex.write_back.poll();
    if (ex.write_back.failed() && ex.node_status == DP_COMP_SUCCESS) {
        ex.node_status = ex.write_back.status();
        ex.node_reason = ex.write_back.why();
    }
    const bool steps_done = ex.steps_done == groups;
    const bool written = ex.node_status != DP_COMP_SUCCESS || ex.write_back.done();
    if (steps_done && written && ex.idle()) {
        if (ex.node_status != DP_COMP_SUCCESS) {
            // MPI may still write into the buffers of steps it gave up on.
            if (ex.node_status == ch::kCollMemberLost) {
                abandoned_.push_back(ex.send);
                abandoned_.push_back(ex.recv);
            }
        }
        finish(t, ex.node_status, ex.node_reason);
        return true;
    }
    ex.gather.pump(*device_, 0, task_pasid_, window());
    if (ex.node_status == DP_COMP_SUCCESS) ex.write_back.pump(*device_, 0, task_pasid_, window());
    return false;
}

void TeamEngine::on_step_done(const InternodeEvent &e) {
    auto id = by_uid_.find(e.team_uid);
    if (id == by_uid_.end() || !teams_.count(id->second)) return;
    Team &t = *teams_.at(id->second);
    if (!t.running || !t.running->spans_nodes) return;
    Execution &ex = *t.running;
    auto step = ex.steps.find(e.op_id);
    if (step == ex.steps.end()) return;  // a poisoned check's answer
    const uint32_t group = step->second;
    ex.steps.erase(step);
    ++ex.steps_done;
    if (!e.algorithm.empty()) ++t.inter_algorithms[e.algorithm];
    if (e.comp_status != DP_COMP_SUCCESS) {
        if (ex.node_status == DP_COMP_SUCCESS || ex.node_status == DP_COMP_ADDRESS_DENIED) {
            ex.node_status = e.comp_status;
            ex.node_reason = e.reason;
        }
    } else if (ex.node_status == DP_COMP_SUCCESS) {
        ex.write_back.enable(group);
    }
    advance_nodes(t);
}

void TeamEngine::retire(Team &t) {
    // MPI may still write into the buffers of a step in flight.
    if (t.running && t.running->spans_nodes) {
        // Nobody here advances the running operation any more: the other
        // nodes must not wait for steps of it this node has not posted.
        if (t.running->steps_posted < t.running->node_plan.groups.size() && t.ops < t.broken_from)
            internode_->broken(t.uid, t.ops, t.broken_reason);
        if (t.running->send) abandoned_.push_back(t.running->send);
        if (t.running->recv) abandoned_.push_back(t.running->recv);
    }
    // The engines may still run tasks of it: keep its records and the
    // members' memory until they are done (poll_orphans).
    if (t.running && !t.running->idle()) orphans_.push_back(std::move(t.running));
    by_uid_.erase(t.uid);
}

void TeamEngine::forget_joins(uint32_t client) {
    for (auto it = joining_.begin(); it != joining_.end();)
        it = it->second.client == client ? joining_.erase(it) : std::next(it);
}

}  // namespace deputy::agent
