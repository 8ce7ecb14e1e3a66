// scatter across nodes: the root's node copies the root's whole source into
// recv, the agents broadcast it from that node, and each member takes its
// block. Every node receives every block: sending each node only its
// ranks' blocks is the scale work's.
#include <algorithm>

#include "coll/node_plan_parts.h"

namespace deputy::coll {

void plan_node_scatter(const NodeLayout &x, NodePlan *plan) {
    const LocalArgs &a = x.a;
    const uint64_t total = x.p * x.n;
    plan->recv_bytes = total;
    one_group(plan, total);
    if (x.args.node_of_rank[a.root] == x.args.node)
        add_chunked(
            plan->gather, 0, Task::Kind::move, total, a, 1,
            [&](size_t, uint64_t off) { return Piece{Where::source, a.root, off}; }, 1,
            [&](size_t, uint64_t off) { return agent_recv(off); });
    for (uint32_t r : x.local)
        add_chunked(
            plan->write_back, 0, Task::Kind::move, x.n, a, 1,
            [&](size_t, uint64_t off) { return agent_recv(r * x.n + off); }, 1,
            [&](size_t, uint64_t off) { return Piece{Where::destination, r, off}; });
}

// A bcast of the root's whole source from the root's node.
NodeExchange exchange_node_scatter(const NodeLayout &x, const NodePlan &plan, uint32_t) {
    NodeExchange e;
    e.kind = NodeExchange::Kind::bcast;
    e.bytes = x.p * x.n;
    e.root_node = uint32_t(std::lower_bound(plan.nodes.begin(), plan.nodes.end(),
                                            x.args.node_of_rank[x.a.root]) -
                           plan.nodes.begin());
    return e;
}

}  // namespace deputy::coll
