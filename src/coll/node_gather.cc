// gather across nodes: each node packs its members' sources into send, the
// agents gather them to the root's node (every node's part in node order;
// the others receive nothing), and the root's node writes every rank's
// block at its place in the root's destination.
#include "coll/node_plan_parts.h"

namespace deputy::coll {

void plan_node_gather(const NodeLayout &x, NodePlan *plan) {
    const uint64_t n = x.n;
    pack_local_sources(x, plan);
    if (x.args.node_of_rank[x.a.root] != x.args.node) {
        plan->recv_bytes = 0;  // (the root's node alone receives)
        return;
    }
    MoveBatch write_back(plan->write_back, 0, x.a);
    for (size_t i = 0; i < x.p; ++i)
        write_back.add(
            n, [&](uint64_t off) { return agent_recv(i * n + off); },
            [&](uint64_t off) {
                return Piece{Where::destination, x.a.root, x.order[i] * n + off};
            });
}

NodeExchange exchange_node_gather(const NodeLayout &x, const NodePlan &plan, uint32_t) {
    return per_node_parts(x, plan, NodeExchange::Kind::gatherv);
}

}  // namespace deputy::coll
