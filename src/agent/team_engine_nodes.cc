// Teams whose members sit on several nodes: hierarchical collectives.
//
// Each node's agent does the same three steps for its local members:
//  1. gather: read the local members' sources into the agent's own buffer
//     (reduced in rank order for the reductions, packed per node for the
//     moves) — direct access, through the pool or process_vm_readv;
//  2. the inter-node step among the team's nodes (Internode: MPI);
//  3. write-back of the results into every local member's destination.
// Allreduce and reduce_scatter are cut into chunks: the inter-node step of
// chunk k runs on the node thread while the service thread reduces chunk
// k+1, and each chunk is written back as soon as it returns.
//
// Every node posts the same sequence of inter-node steps for a team, even
// when its own members fail locally (disagreeing heads, a buffer out of
// range): it then posts a "poisoned" check that makes the other nodes fail
// the operation with DP_COMP_MISMATCH instead of waiting for it.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>

#include "agent/team_engine.h"
#include "agent/team_engine_state.h"
#include "common/log.h"
#include "mover/kernels.h"
#include "mover/names.h"

namespace deputy::agent {
namespace {

namespace ch = channel;

// Reductions go to the other nodes in chunks of this many bytes.
constexpr uint64_t kNodeChunkBytes = 4ull << 20;
// MPI counts are ints: one exchange of moved bytes stays under this.
constexpr uint64_t kMaxStepBytes = INT_MAX;
constexpr uint8_t kPoisonOpcode = 0xff;

InterOp check_of(const dp_desc_t &h) {
    InterOp op;
    op.check = true;
    op.opcode = h.opcode;
    op.dtype = h.dtype;
    op.redop = h.redop;
    op.count = h.size;
    op.root = h.aux;
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
    // A local join of the same key with another secret is another job's:
    // refused here. Across nodes the agents agree on node_key(), so members
    // with different secrets never meet in one team.
    const std::string key = node_key(secret, m.key);
    for (const auto &[k, j] : joining_)
        if (plain_key(k) == m.key && k != key) {
            DP_LOG_LIMITED(s.space().log(),
                           "agent: team join from client {} (pid {}) refused: team '{}': wrong job "
                           "secret",
                           s.id, s.creds.pid, m.key);
            hooks_.send_ready(s, {DP_ERR_DENIED, 0,
                                  fmt::format("team '{}': wrong job secret (the team forming "
                                              "under this key belongs to another job)",
                                              m.key)});
            return;
        }
    std::set<std::string> keys;
    for (const auto &[k, j] : joining_) keys.insert(k);
    if (!keys.count(key) && keys.size() >= config_.max_forming_teams) {
        hooks_.send_ready(s, {DP_ERR_TOO_LARGE, 0,
                              fmt::format("team '{}': {} teams are forming already "
                                          "(max_forming_teams = {})",
                                          m.key, keys.size(), config_.max_forming_teams)});
        return;
    }
    joining_.insert({key, {s.id, m.rank, m.size}});
    internode_->join(key, m.rank, m.size,
                     m.timeout_ms ? m.timeout_ms : uint32_t(kDefaultTeamTimeoutMs));
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
                DP_LOG_INFO("agent: team '{}' broken on another node: {}", t.key, e.reason);
                break_team(t, e.reason);
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
    t.queues.resize(t.size);
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
        if (c) hooks_.send_ready(*c, {DP_OK, t.id, ""});
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
            hooks_.send_ready(*c, {e.status, 0, reason});
        it = joining_.erase(it);
    }
}

void TeamEngine::start_nodes(Team &t, std::vector<dp_desc_t> heads) {
    auto ex = std::make_unique<Execution>();
    ex->node_step = true;
    const uint64_t sequence = ++t.ops;
    const uint32_t first_local = t.local_ranks.front();
    const dp_desc_t &h0 = heads[first_local];
    // Posts one inter-node step of this operation; off/len: the part of the
    // agent's buffer it covers, for the write-back.
    auto post = [&](InterOp op, uint64_t off, uint64_t len) {
        op.team_uid = t.uid;
        op.op_id = next_step_id_++;
        op.sequence = sequence;
        ex->steps[op.op_id] = {off, len};
        internode_->start(std::move(op));
    };
    // A local failure: the other nodes must fail too, not wait.
    auto fail_here = [&](uint8_t status) {
        InterOp poison = check_of(h0);
        poison.opcode = kPoisonOpcode;
        poison.count = internode_->node();  // unlike any other node's
        poison.kind = InterOp::Kind::barrier;
        poison.team_uid = t.uid;
        poison.op_id = next_step_id_++;  // not tracked: its answer is ignored
        poison.sequence = sequence;
        internode_->start(std::move(poison));
        ex->heads = std::move(heads);
        t.running = std::move(ex);
        finish(t, status);
    };
    for (uint32_t r : t.local_ranks) {
        const std::string diff = head_difference(h0, heads[r]);
        if (!diff.empty()) {
            DP_LOG_WARN("agent: team '{}' operation {}: ranks {} and {} disagree: {}", t.key,
                        sequence, first_local, r, diff);
            return fail_here(DP_COMP_MISMATCH);
        }
    }
    if (uint8_t invalid = head_invalid(h0, t.size)) return fail_here(invalid);
    const uint8_t op = h0.opcode;
    const uint64_t esize = mover::dtype_size(h0.dtype);
    const uint64_t p = t.size;
    const uint64_t n = h0.size * esize;
    const CollLengths len = coll_lengths(op, h0.size, esize, p);
    for (uint32_t r : t.local_ranks) {
        ClientSession *c = hooks_.find_client(t.members[r]);
        if (!c) return fail_here(DP_COMP_MEMBER_LOST);
        auto reachable = [&](uint64_t addr, uint64_t bytes, mover::Access a) {
            return bytes == 0 || c->space().translate(addr, bytes, a) ||
                   c->space().direct_allows(addr, bytes);
        };
        if (!reachable(heads[r].src, len.src, mover::Access::read) ||
            !reachable(heads[r].dst, len.dst, mover::Access::write)) {
            DP_LOG_WARN("agent: team '{}' {}: rank {}'s buffers are outside its pool and "
                        "registered memory",
                        t.key, ch::coll_opcode_name(op), r);
            return fail_here(DP_COMP_ADDRESS_DENIED);
        }
    }
    ex->bytes = len.dst;
    std::string why;
    auto read = [&](uint32_t r, uint64_t addr, void *out, uint64_t bytes) {
        if (read_member(t.members[r], addr, out, bytes, &why)) return;
        ex->node_status = DP_COMP_ADDRESS_DENIED;  // the steps still run: the others wait for them
        ex->node_reason = why;
    };
    // Node order of the team, and each node's ranks (ascending).
    std::vector<uint32_t> nodes = t.node_of_rank;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    std::vector<std::vector<uint32_t>> ranks_of(nodes.size());
    for (uint32_t r = 0; r < p; ++r)
        ranks_of[size_t(std::lower_bound(nodes.begin(), nodes.end(), t.node_of_rank[r]) -
                        nodes.begin())]
            .push_back(r);
    const uint64_t local = t.local_ranks.size();
    bool checked = false;
    auto step = [&](InterOp::Kind kind) {
        InterOp o = check_of(h0);
        o.check = !checked;
        checked = true;
        o.kind = kind;
        return o;
    };
    if (op == ch::kCollBarrier || n == 0) {
        post(step(InterOp::Kind::barrier), 0, 0);
    } else if (op == ch::kCollAllreduce || op == ch::kCollReduceScatter) {
        // Reduce everything (p blocks for reduce_scatter), then keep ours.
        const uint64_t total = op == ch::kCollAllreduce ? n : p * n;
        if (total > kMaxStepBytes * 64) return fail_here(DP_COMP_INVALID_SIZE);
        ex->recv = std::make_shared<std::vector<uint8_t>>(total);
        std::vector<uint8_t> tmp;
        const uint64_t chunk = std::max<uint64_t>(esize, kNodeChunkBytes / esize * esize);
        for (uint64_t off = 0; off < total; off += chunk) {
            const uint64_t c = std::min(chunk, total - off);
            uint8_t *acc = ex->recv->data() + off;
            read(first_local, heads[first_local].src + off, acc, c);
            tmp.resize(c);
            for (size_t i = 1; i < t.local_ranks.size(); ++i) {
                read(t.local_ranks[i], heads[t.local_ranks[i]].src + off, tmp.data(), c);
                mover::kernels::reduce(acc, acc, tmp.data(), c / esize, dp_dtype_t(h0.dtype),
                                       dp_op_t(h0.redop));
            }
            InterOp o = step(InterOp::Kind::allreduce);
            o.recv = acc;
            o.elements = c / esize;
            post(std::move(o), off, c);
        }
    } else if (op == ch::kCollAllgather) {
        if (p * n > kMaxStepBytes) return fail_here(DP_COMP_INVALID_SIZE);
        ex->send = std::make_shared<std::vector<uint8_t>>(local * n);
        ex->recv = std::make_shared<std::vector<uint8_t>>(p * n);
        for (size_t i = 0; i < local; ++i)
            read(t.local_ranks[i], heads[t.local_ranks[i]].src, ex->send->data() + i * n, n);
        InterOp o = step(InterOp::Kind::allgatherv);
        o.send = ex->send->data();
        o.recv = ex->recv->data();
        for (const auto &rs : ranks_of) o.part_bytes.push_back(rs.size() * n);
        post(std::move(o), 0, p * n);
    } else if (op == ch::kCollAlltoall) {
        // To node k: for each local source s, its blocks for k's ranks.
        if (local * p * n > kMaxStepBytes || p * local * n > kMaxStepBytes)
            return fail_here(DP_COMP_INVALID_SIZE);
        ex->send = std::make_shared<std::vector<uint8_t>>(local * p * n);
        ex->recv = std::make_shared<std::vector<uint8_t>>(p * local * n);
        std::vector<uint8_t> whole(p * n);
        InterOp o = step(InterOp::Kind::alltoallv);
        uint64_t at = 0;
        std::vector<uint64_t> part_at(nodes.size());
        for (size_t k = 0; k < nodes.size(); ++k) {
            part_at[k] = at;
            o.send_offsets.push_back(at);
            o.send_bytes.push_back(local * ranks_of[k].size() * n);
            at += o.send_bytes.back();
        }
        for (size_t i = 0; i < local; ++i) {
            const uint32_t s = t.local_ranks[i];
            read(s, heads[s].src, whole.data(), p * n);
            for (size_t k = 0; k < nodes.size(); ++k)
                for (size_t j = 0; j < ranks_of[k].size(); ++j)
                    std::memcpy(ex->send->data() + part_at[k] + (i * ranks_of[k].size() + j) * n,
                                whole.data() + ranks_of[k][j] * n, n);
        }
        at = 0;
        for (size_t k = 0; k < nodes.size(); ++k) {
            o.recv_offsets.push_back(at);
            o.recv_bytes.push_back(ranks_of[k].size() * local * n);
            at += o.recv_bytes.back();
        }
        o.send = ex->send->data();
        o.recv = ex->recv->data();
        post(std::move(o), 0, 0);
    } else if (op == ch::kCollBcast) {
        if (n > kMaxStepBytes) return fail_here(DP_COMP_INVALID_SIZE);
        const uint32_t root = uint32_t(h0.aux);
        ex->recv = std::make_shared<std::vector<uint8_t>>(n);
        if (t.node_of_rank[root] == internode_->node()) read(root, heads[root].src, ex->recv->data(), n);
        InterOp o = step(InterOp::Kind::bcast);
        o.recv = ex->recv->data();
        o.bytes = n;
        o.root_node = uint32_t(std::lower_bound(nodes.begin(), nodes.end(), t.node_of_rank[root]) -
                               nodes.begin());
        post(std::move(o), 0, n);
    }
    ex->heads = std::move(heads);
    t.running = std::move(ex);
}

void TeamEngine::on_step_done(const InternodeEvent &e) {
    auto id = by_uid_.find(e.team_uid);
    if (id == by_uid_.end() || !teams_.count(id->second)) return;
    Team &t = *teams_.at(id->second);
    if (!t.running || !t.running->node_step) return;
    Execution &ex = *t.running;
    auto step = ex.steps.find(e.op_id);
    if (step == ex.steps.end()) return;  // a poisoned check's answer
    const auto [off, len] = step->second;
    ex.steps.erase(step);
    if (!e.algorithm.empty()) ++t.inter_algorithms[e.algorithm];
    if (e.comp_status != DP_COMP_SUCCESS) {
        if (ex.node_status == DP_COMP_SUCCESS || ex.node_status == DP_COMP_ADDRESS_DENIED) {
            ex.node_status = e.comp_status;
            ex.node_reason = e.reason;
        }
    } else if (ex.node_status == DP_COMP_SUCCESS && ex.recv) {
        const dp_desc_t &h0 = ex.heads[t.local_ranks.front()];
        const uint8_t op = h0.opcode;
        const uint64_t n = h0.size * mover::dtype_size(h0.dtype);
        std::string why;
        bool ok = true;
        auto write = [&](uint32_t r, uint64_t addr, const void *in, uint64_t bytes) {
            if (bytes) ok &= write_member(t.members[r], addr, in, bytes, &why);
        };
        const uint8_t *res = ex.recv->data();
        if (op == ch::kCollAllreduce) {
            for (uint32_t r : t.local_ranks) write(r, ex.heads[r].dst + off, res + off, len);
        } else if (op == ch::kCollReduceScatter) {
            for (uint32_t r : t.local_ranks) {  // block r of the reduced whole
                const uint64_t lo = std::max<uint64_t>(off, r * n), hi = std::min(off + len, (r + 1) * n);
                if (lo < hi) write(r, ex.heads[r].dst + (lo - r * n), res + lo, hi - lo);
            }
        } else if (op == ch::kCollAllgather) {
            // recv holds the nodes' parts in node order, each in rank order.
            std::vector<uint32_t> order(t.size);
            for (uint32_t r = 0; r < t.size; ++r) order[r] = r;
            std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
                return t.node_of_rank[a] < t.node_of_rank[b];
            });
            for (uint32_t r : t.local_ranks)
                for (uint32_t i = 0; i < t.size; ++i) {
                    const uint64_t to = ex.heads[r].dst + uint64_t(order[i]) * n;
                    if (order[i] == r && to == ex.heads[r].src) continue;  // in place
                    write(r, to, res + uint64_t(i) * n, n);
                }
        } else if (op == ch::kCollAlltoall) {
            // From node k: for each of its ranks s, one block per local rank.
            const uint64_t local = t.local_ranks.size();
            std::vector<uint32_t> order(t.size);
            for (uint32_t r = 0; r < t.size; ++r) order[r] = r;
            std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
                return t.node_of_rank[a] < t.node_of_rank[b];
            });
            for (uint32_t i = 0; i < t.size; ++i)
                for (uint64_t j = 0; j < local; ++j)
                    write(t.local_ranks[j], ex.heads[t.local_ranks[j]].dst + uint64_t(order[i]) * n,
                          res + (i * local + j) * n, n);
        } else if (op == ch::kCollBcast) {
            for (uint32_t r : t.local_ranks)
                if (r != h0.aux) write(r, ex.heads[r].dst, res, n);
        }
        if (!ok) {
            ex.node_status = DP_COMP_ADDRESS_DENIED;
            ex.node_reason = why;
        }
    }
    if (ex.steps.empty()) finish_nodes(t);
}

void TeamEngine::retire(Team &t) {
    // MPI may still write into the buffers of a step in flight.
    if (t.running && t.running->node_step) {
        if (t.running->send) abandoned_.push_back(t.running->send);
        if (t.running->recv) abandoned_.push_back(t.running->recv);
    }
    // The engines may still run batches of it: keep its records and the
    // members' memory until they are done (poll_orphans).
    if (t.running && !t.running->node_step && t.running->submitted > 0)
        orphans_.push_back(std::move(t.running));
    by_uid_.erase(t.uid);
}

void TeamEngine::forget_joins(uint32_t client) {
    for (auto it = joining_.begin(); it != joining_.end();)
        it = it->second.client == client ? joining_.erase(it) : std::next(it);
}

void TeamEngine::finish_nodes(Team &t) {
    Execution &ex = *t.running;
    if (ex.node_status != DP_COMP_SUCCESS) {
        DP_LOG_WARN("agent: team '{}' {}: {}", t.key,
                    ch::coll_opcode_name(ex.heads[t.local_ranks.front()].opcode), ex.node_reason);
        // MPI may still write into the buffers of steps it gave up on.
        if (ex.node_status == DP_COMP_MEMBER_LOST) {
            if (ex.send) abandoned_.push_back(ex.send);
            if (ex.recv) abandoned_.push_back(ex.recv);
        }
    }
    finish(t, ex.node_status);
}

}  // namespace deputy::agent
