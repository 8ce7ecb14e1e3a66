// allgather across nodes: each node packs its members' sources into send,
// the agents allgather them (every node's part in node order), and every
// member gets every rank's block at its rank's place.
#include "coll/node_plan_parts.h"

namespace deputy::coll {

void pack_local_sources(const NodeLayout &x, NodePlan *plan) {
    const uint64_t n = x.n;
    plan->send_bytes = x.l * n;
    plan->recv_bytes = x.p * n;
    one_group(plan, x.p * n);
    MoveBatch gather(plan->gather, 0, x.a);
    for (size_t i = 0; i < x.l; ++i)
        gather.add(
            n, [&](uint64_t off) { return Piece{Where::source, x.local[i], off}; },
            [&](uint64_t off) { return agent_send(i * n + off); });
}

void plan_node_allgather(const NodeLayout &x, NodePlan *plan) {
    const uint64_t n = x.n;
    pack_local_sources(x, plan);
    for (size_t i = 0; i < x.p; ++i)
        add_chunked(
            plan->write_back, 0, Task::Kind::move, n, x.a, 1,
            [&](size_t, uint64_t off) { return agent_recv(i * n + off); }, x.l,
            [&](size_t j, uint64_t off) {
                return Piece{Where::destination, x.local[j], x.order[i] * n + off};
            });
}

NodeExchange exchange_node_allgather(const NodeLayout &x, const NodePlan &plan, uint32_t) {
    return per_node_parts(x, plan, NodeExchange::Kind::allgatherv);
}

}  // namespace deputy::coll
