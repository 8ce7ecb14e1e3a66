// The several-node plan of a collective: the team's layout over its nodes,
// then the collective's own gather, write-back and step between agents
// from its file (coll/node_<name>.cc), through one table indexed by
// Collective.
#include "coll/node_plan.h"

#include <algorithm>
#include <iterator>

#include "coll/node_plan_parts.h"

namespace deputy::coll {

void plan_node_allreduce(const NodeLayout &, NodePlan *);
void plan_node_reduce_scatter(const NodeLayout &, NodePlan *);
void plan_node_reduce_scatterv(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_reduction(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_allgather(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_allgather(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_alltoall(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_alltoall(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_bcast(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_bcast(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_alltoallv(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_alltoallv(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_reduce(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_reduce(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_gather(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_gather(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_scatter(const NodeLayout &, NodePlan *);
NodeExchange exchange_node_scatter(const NodeLayout &, const NodePlan &, uint32_t);
void plan_node_scan(const NodeLayout &, NodePlan *);
void plan_node_exscan(const NodeLayout &, NodePlan *);

namespace {

// A barrier moves nothing: its step is the agreement.
void plan_node_barrier(const NodeLayout &, NodePlan *plan) { one_group(plan, 0); }
NodeExchange exchange_node_barrier(const NodeLayout &, const NodePlan &, uint32_t) {
    NodeExchange e;
    e.kind = NodeExchange::Kind::barrier;
    return e;
}

struct NodeEntry {
    Collective collective;
    NodePlanFn plan;
    NodeExchangeFn exchange;
};
// Indexed by Collective: a collective added to the one table
// (coll/collective.h) without its plan across nodes does not build.
constexpr NodeEntry kNodePlans[] = {
    {Collective::allreduce, plan_node_allreduce, exchange_node_reduction},
    {Collective::reduce_scatter, plan_node_reduce_scatter, exchange_node_reduction},
    {Collective::allgather, plan_node_allgather, exchange_node_allgather},
    {Collective::alltoall, plan_node_alltoall, exchange_node_alltoall},
    {Collective::bcast, plan_node_bcast, exchange_node_bcast},
    {Collective::barrier, plan_node_barrier, exchange_node_barrier},
    {Collective::alltoallv, plan_node_alltoallv, exchange_node_alltoallv},
    {Collective::reduce, plan_node_reduce, exchange_node_reduce},
    {Collective::gather, plan_node_gather, exchange_node_gather},
    // scan and exscan exchange as allgather does (every node's part).
    {Collective::scatter, plan_node_scatter, exchange_node_scatter},
    {Collective::scan, plan_node_scan, exchange_node_allgather},
    {Collective::exscan, plan_node_exscan, exchange_node_allgather},
    // The other vector collectives are alltoallv's moves (collective.h):
    // each node sends every other node the blocks its members address to
    // that node's members (an allgatherv's block once per receiving member).
    {Collective::allgatherv, plan_node_alltoallv, exchange_node_alltoallv},
    {Collective::gatherv, plan_node_alltoallv, exchange_node_alltoallv},
    {Collective::scatterv, plan_node_alltoallv, exchange_node_alltoallv},
    {Collective::reduce_scatterv, plan_node_reduce_scatterv, exchange_node_reduction},
};
static_assert(std::size(kNodePlans) == kCollectiveCount, "a node plan for every collective");
constexpr bool in_order() {
    for (size_t i = 0; i < std::size(kNodePlans); ++i)
        if (size_t(kNodePlans[i].collective) != i) return false;
    return true;
}
static_assert(in_order(), "kNodePlans is indexed by Collective");

NodeLayout layout(const NodeArgs &args, const NodePlan &plan) {
    NodeLayout x{args, args.collective, plan.local_ranks, {}, 0, 0, 0, 0};
    for (const auto &rs : plan.ranks_of) x.order.insert(x.order.end(), rs.begin(), rs.end());
    x.element = dp_dtype_size(x.a.dtype);
    x.n = x.a.count * x.element;
    x.p = x.a.size;
    x.l = plan.local_ranks.size();
    return x;
}

}  // namespace

NodePlan build_node_plan(const NodeArgs &args) {
    const LocalArgs &a = args.collective;
    NodePlan plan;
    for (NodeStage *s : {&plan.gather, &plan.write_back}) {
        s->plan.collective = a.collective;
        s->plan.dtype = a.dtype;
        s->plan.op = a.op;
    }
    for (uint32_t r = 0; r < a.size; ++r)
        if (args.node_of_rank[r] == args.node) plan.local_ranks.push_back(r);
    plan.nodes = args.node_of_rank;
    std::sort(plan.nodes.begin(), plan.nodes.end());
    plan.nodes.erase(std::unique(plan.nodes.begin(), plan.nodes.end()), plan.nodes.end());
    plan.ranks_of.resize(plan.nodes.size());
    for (uint32_t r = 0; r < a.size; ++r)
        plan.ranks_of[size_t(std::lower_bound(plan.nodes.begin(), plan.nodes.end(),
                                              args.node_of_rank[r]) -
                             plan.nodes.begin())]
            .push_back(r);
    kNodePlans[size_t(a.collective)].plan(layout(args, plan), &plan);
    return plan;
}

NodeExchange node_exchange(const NodeArgs &args, const NodePlan &plan, uint32_t group) {
    return kNodePlans[size_t(args.collective.collective)].exchange(layout(args, plan), plan, group);
}

}  // namespace deputy::coll
