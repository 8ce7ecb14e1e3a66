// alltoall across nodes: each node packs, for each node k, its members'
// blocks for k's ranks; the agents alltoallv those parts; each member takes
// its block from every rank.
#include "coll/node_plan_parts.h"

namespace deputy::coll {

void plan_node_alltoall(const NodeLayout &x, NodePlan *plan) {
    const uint64_t n = x.n, l = x.l;
    plan->send_bytes = l * x.p * n;
    plan->recv_bytes = x.p * l * n;
    one_group(plan, 0);
    // To node k: for each local source i, its blocks for k's ranks.
    uint64_t part = 0;
    MoveBatch gather(plan->gather, 0, x.a);
    for (const auto &rs : plan->ranks_of) {
        for (size_t i = 0; i < l; ++i)
            for (size_t j = 0; j < rs.size(); ++j) {
                const uint64_t to = part + (i * rs.size() + j) * n;
                gather.add(
                    n,
                    [&](uint64_t off) {
                        return Piece{Where::source, x.local[i], rs[j] * n + off};
                    },
                    [&](uint64_t off) { return agent_send(to + off); });
            }
        part += l * rs.size() * n;
    }
    gather.flush();
    // From each rank i (node order), one block per local rank j.
    MoveBatch write_back(plan->write_back, 0, x.a);
    for (size_t i = 0; i < x.p; ++i)
        for (size_t j = 0; j < l; ++j)
            write_back.add(
                n, [&](uint64_t off) { return agent_recv((i * l + j) * n + off); },
                [&](uint64_t off) {
                    return Piece{Where::destination, x.local[j], x.order[i] * n + off};
                });
}

NodeExchange exchange_node_alltoall(const NodeLayout &x, const NodePlan &plan, uint32_t) {
    NodeExchange e;
    e.kind = NodeExchange::Kind::alltoallv;
    uint64_t sent = 0, received = 0;
    for (const auto &rs : plan.ranks_of) {
        e.send_offsets.push_back(sent);
        e.send_bytes.push_back(x.l * rs.size() * x.n);
        sent += e.send_bytes.back();
        e.recv_offsets.push_back(received);
        e.recv_bytes.push_back(rs.size() * x.l * x.n);
        received += e.recv_bytes.back();
    }
    return e;
}

}  // namespace deputy::coll
