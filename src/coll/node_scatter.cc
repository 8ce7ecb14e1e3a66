// scatter across nodes: the root's node packs the root's source into send
// in node order (each node's ranks' blocks together), the agents scatter it
// from that node, each node receiving only its own ranks' blocks, and each
// member takes its block.
#include "coll/node_plan_parts.h"

namespace deputy::coll {

void plan_node_scatter(const NodeLayout &x, NodePlan *plan) {
    const LocalArgs &a = x.a;
    const bool root_here = x.args.node_of_rank[a.root] == x.args.node;
    plan->send_bytes = root_here ? x.p * x.n : 0;
    plan->recv_bytes = x.l * x.n;
    one_group(plan, x.l * x.n);
    if (root_here) {
        MoveBatch gather(plan->gather, 0, a);
        for (size_t i = 0; i < x.p; ++i)
            gather.add(
                x.n,
                [&](uint64_t off) { return Piece{Where::source, a.root, x.order[i] * x.n + off}; },
                [&](uint64_t off) { return agent_send(i * x.n + off); });
    }
    MoveBatch write_back(plan->write_back, 0, a);
    for (size_t j = 0; j < x.l; ++j)
        write_back.add(
            x.n, [&](uint64_t off) { return agent_recv(j * x.n + off); },
            [&](uint64_t off) { return Piece{Where::destination, x.local[j], off}; });
}

NodeExchange exchange_node_scatter(const NodeLayout &x, const NodePlan &plan, uint32_t) {
    return per_node_parts(x, plan, NodeExchange::Kind::scatterv);
}

}  // namespace deputy::coll
