// bcast across nodes: the root's node copies its data into recv, the
// agents broadcast recv from that node, and every other member takes it.
#include "coll/node_plan_parts.h"

namespace deputy::coll {

void plan_node_bcast(const NodeLayout &x, NodePlan *plan) {
    const LocalArgs &a = x.a;
    plan->recv_bytes = x.n;
    one_group(plan, x.n);
    if (x.args.node_of_rank[a.root] == x.args.node)
        add_chunked(
            plan->gather, 0, Task::Kind::move, x.n, a, 1,
            [&](size_t, uint64_t off) { return Piece{Where::source, a.root, off}; }, 1,
            [&](size_t, uint64_t off) { return agent_recv(off); });
    std::vector<uint32_t> others;
    for (uint32_t r : x.local)
        if (r != a.root) others.push_back(r);
    if (!others.empty())
        add_chunked(
            plan->write_back, 0, Task::Kind::move, x.n, a, 1,
            [&](size_t, uint64_t off) { return agent_recv(off); }, others.size(),
            [&](size_t j, uint64_t off) { return Piece{Where::destination, others[j], off}; });
}

NodeExchange exchange_node_bcast(const NodeLayout &x, const NodePlan &plan, uint32_t) {
    NodeExchange e;
    e.kind = NodeExchange::Kind::bcast;
    e.bytes = x.n;
    e.root_node = root_node_index(x, plan);
    return e;
}

}  // namespace deputy::coll
