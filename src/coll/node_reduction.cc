// allreduce, reduce_scatter(v) and reduce across nodes: each node reduces
// its members' sources (all P blocks for reduce_scatter) into recv, the
// agents allreduce recv in stage_bytes pieces, and each member takes its
// part of each piece as it arrives (the whole vector, its own block, or for
// reduce the root alone the whole vector). reduce_scatterv's blocks are
// those of its counts, the same on every member (coll/vector_counts.h).
// reduce's pieces are reduced to the root's node alone (MPI_Ireduce between
// the agents: a tree, not an allreduce).
#include <algorithm>

#include "coll/node_plan_parts.h"
#include "coll/vector_counts.h"

namespace deputy::coll {
namespace {

enum class Keeps { everything, own_block, root_only };

// Member r's block of the reduced vector: [start, +len).
struct Block {
    uint64_t start, len;
};

void plan_reduction(const NodeLayout &x, NodePlan *plan, Keeps keeps) {
    const bool scatter = keeps == Keeps::own_block;
    const LocalArgs &a = x.a;
    const uint64_t n = x.n;
    const bool vector = is_vector(a.collective);
    // Any local member's counts give every block (the same on all).
    const MemberVector *v = vector ? &(*a.vectors)[x.local.front()] : nullptr;
    const auto block_of = [&](uint32_t r) -> Block {
        if (v) return {v->send[r].offset, v->send[r].bytes};
        return {r * n, n};
    };
    const uint64_t total = v ? v->send_total : scatter ? x.p * n : n;
    plan->recv_bytes = total;
    uint32_t group = 0;
    for_each_chunk(total, x.args.stage_bytes, x.element, [&](uint64_t base, uint64_t len) {
        plan->groups.push_back({base, len});
        add_chunked(
            plan->gather, group, Task::Kind::reduce, len, a, x.l,
            [&](size_t i, uint64_t off) { return Piece{Where::source, x.local[i], base + off}; },
            1, [&](size_t, uint64_t off) { return agent_recv(base + off); });
        for (uint32_t r : x.local) {
            if (keeps == Keeps::root_only && r != a.root) continue;
            // The part of this piece that is member r's result.
            const Block b = block_of(r);
            const uint64_t lo = scatter ? std::max<uint64_t>(base, b.start) : base;
            const uint64_t hi =
                scatter ? std::min<uint64_t>(base + len, b.start + b.len) : base + len;
            if (lo >= hi) continue;
            const uint64_t shift = scatter ? b.start : 0;
            add_chunked(
                plan->write_back, group, Task::Kind::move, hi - lo, a, 1,
                [&](size_t, uint64_t off) { return agent_recv(lo + off); }, 1,
                [&](size_t, uint64_t off) {
                    return Piece{Where::destination, r, lo - shift + off};
                });
        }
        ++group;
    });
    plan->gather.groups = plan->write_back.groups = group;
    if (group == 0) one_group(plan, 0);
}

}  // namespace

void plan_node_allreduce(const NodeLayout &x, NodePlan *plan) {
    plan_reduction(x, plan, Keeps::everything);
}
void plan_node_reduce_scatter(const NodeLayout &x, NodePlan *plan) {
    plan_reduction(x, plan, Keeps::own_block);
}
void plan_node_reduce(const NodeLayout &x, NodePlan *plan) {
    plan_reduction(x, plan, Keeps::root_only);
}
void plan_node_reduce_scatterv(const NodeLayout &x, NodePlan *plan) {
    plan_reduction(x, plan, Keeps::own_block);
    // Its counts never travel: the agents compare their digest, so that
    // nodes whose members disagree fail every rank before a byte moves.
    plan->check_digest = reduction_layout_digest((*x.a.vectors)[x.local.front()]);
}

// Each: the group's piece of recv, reduced in place across the nodes.
NodeExchange exchange_node_reduction(const NodeLayout &x, const NodePlan &plan, uint32_t group) {
    NodeExchange e;
    e.kind = NodeExchange::Kind::allreduce;
    e.recv_offset = plan.groups[group].offset;
    e.elements = plan.groups[group].bytes / x.element;
    return e;
}

NodeExchange exchange_node_reduce(const NodeLayout &x, const NodePlan &plan, uint32_t group) {
    NodeExchange e = exchange_node_reduction(x, plan, group);
    e.kind = NodeExchange::Kind::reduce;
    e.root_node = root_node_index(x, plan);
    return e;
}

}  // namespace deputy::coll
