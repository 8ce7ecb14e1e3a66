// scan and exscan across nodes: each node packs its members' sources into
// send, the agents allgather them (every rank's source on every node, in
// node order), and each member's result is reduced from them in rank
// order (ranks 0..r, or 0..r-1), as on one node. Every node receives every
// source: an exclusive scan of the nodes' partial results is the scale
// work's (it needs the ranks numbered node by node to stay in rank order).
#include "coll/node_plan_parts.h"

namespace deputy::coll {
namespace {

void plan_prefix(const NodeLayout &x, NodePlan *plan, bool inclusive) {
    const uint64_t n = x.n;
    pack_local_sources(x, plan);
    // Where rank k's source lands in recv.
    std::vector<uint64_t> at(x.p);
    for (size_t i = 0; i < x.p; ++i) at[x.order[i]] = i * n;
    for (uint32_t r : x.local) {
        const size_t inputs = inclusive ? r + 1 : r;
        if (inputs == 0) continue;  // exscan's rank 0: left alone
        add_chunked(
            plan->write_back, 0, Task::Kind::reduce, n, x.a, inputs,
            [&](size_t k, uint64_t off) { return agent_recv(at[k] + off); }, 1,
            [&](size_t, uint64_t off) { return Piece{Where::destination, r, off}; });
    }
}

}  // namespace

void plan_node_scan(const NodeLayout &x, NodePlan *plan) { plan_prefix(x, plan, true); }
void plan_node_exscan(const NodeLayout &x, NodePlan *plan) { plan_prefix(x, plan, false); }

}  // namespace deputy::coll
