#include "coll/local_plan.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <tuple>
#include <vector>

namespace deputy::coll {

// The one-node plan of each collective, one file each (local_<name>.cc).
void plan_local_allreduce(const LocalArgs &args, LocalPlan *plan);
void plan_local_reduce_scatter(const LocalArgs &args, LocalPlan *plan);
void plan_local_allgather(const LocalArgs &args, LocalPlan *plan);
void plan_local_alltoall(const LocalArgs &args, LocalPlan *plan);
void plan_local_bcast(const LocalArgs &args, LocalPlan *plan);
void plan_local_alltoallv(const LocalArgs &args, LocalPlan *plan);
void plan_local_reduce(const LocalArgs &args, LocalPlan *plan);
void plan_local_gather(const LocalArgs &args, LocalPlan *plan);
void plan_local_scatter(const LocalArgs &args, LocalPlan *plan);
void plan_local_scan(const LocalArgs &args, LocalPlan *plan);
void plan_local_exscan(const LocalArgs &args, LocalPlan *plan);
void plan_local_reduce_scatterv(const LocalArgs &args, LocalPlan *plan);
// A barrier moves no bytes: agreeing on it is all there is.
void plan_local_barrier(const LocalArgs &, LocalPlan *) {}

namespace {

using PlanFn = void (*)(const LocalArgs &, LocalPlan *);
struct PlanEntry {
    Collective collective;
    PlanFn plan;
};
// Indexed by Collective: a collective added to the one table
// (coll/collective.h) without a plan here does not build.
constexpr PlanEntry kPlans[] = {
    {Collective::allreduce, plan_local_allreduce},
    {Collective::reduce_scatter, plan_local_reduce_scatter},
    {Collective::allgather, plan_local_allgather},
    {Collective::alltoall, plan_local_alltoall},
    {Collective::bcast, plan_local_bcast},
    {Collective::barrier, plan_local_barrier},
    {Collective::alltoallv, plan_local_alltoallv},
    {Collective::reduce, plan_local_reduce},
    {Collective::gather, plan_local_gather},
    {Collective::scatter, plan_local_scatter},
    {Collective::scan, plan_local_scan},
    {Collective::exscan, plan_local_exscan},
    // The other vector collectives are alltoallv's moves (collective.h).
    {Collective::allgatherv, plan_local_alltoallv},
    {Collective::gatherv, plan_local_alltoallv},
    {Collective::scatterv, plan_local_alltoallv},
    {Collective::reduce_scatterv, plan_local_reduce_scatterv},
};
static_assert(std::size(kPlans) == kCollectiveCount, "a local plan for every collective");
constexpr bool in_order() {
    for (size_t i = 0; i < std::size(kPlans); ++i)
        if (size_t(kPlans[i].collective) != i) return false;
    return true;
}
static_assert(in_order(), "kPlans is indexed by Collective");

}  // namespace

void LocalPlan::add(Task::Kind kind, uint64_t bytes, std::span<const Piece> in,
                    std::span<const Piece> out) {
    if (writer) {
        // The writer's share of the task: its own outputs, and of a move
        // that pairs input i with output i, those pairs' inputs. A reduce
        // (or a move of one input) keeps every input: the same bytes.
        auto mine = [&](const Piece &p) {
            return p.where == Where::destination && p.rank == *writer;
        };
        const bool paired = kind == Task::Kind::move && in.size() == out.size() && in.size() > 1;
        std::vector<Piece> own_in, own_out;
        for (size_t i = 0; i < out.size(); ++i)
            if (mine(out[i])) {
                own_out.push_back(out[i]);
                if (paired) own_in.push_back(in[i]);
            }
        if (own_out.empty()) return;
        if (!paired) own_in.assign(in.begin(), in.end());
        return append(kind, bytes, own_in, own_out);
    }
    append(kind, bytes, in, out);
}

void LocalPlan::append(Task::Kind kind, uint64_t bytes, std::span<const Piece> in,
                       std::span<const Piece> out) {
    Task t;
    t.kind = kind;
    t.bytes = bytes;
    t.first_input = uint32_t(pieces.size());
    t.inputs = uint32_t(in.size());
    pieces.insert(pieces.end(), in.begin(), in.end());
    t.first_output = uint32_t(pieces.size());
    t.outputs = uint32_t(out.size());
    pieces.insert(pieces.end(), out.begin(), out.end());
    if (in.size() > 1) {
        thread_local std::vector<uint32_t> first;
        first_equal(in, &first);
        for (uint32_t i = 0; i < first.size() && !t.repeats; ++i) t.repeats = first[i] != i;
    }
    tasks.push_back(t);
    if (bytes > max_task_bytes) max_task_bytes = bytes;
}

void first_equal(std::span<const Piece> pieces, std::vector<uint32_t> *first) {
    thread_local std::vector<uint32_t> order;
    order.resize(pieces.size());
    std::iota(order.begin(), order.end(), 0u);
    auto key = [&](uint32_t i) {
        return std::tuple(pieces[i].where, pieces[i].rank, pieces[i].offset, i);
    };
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    first->resize(pieces.size());
    for (size_t k = 0; k < order.size(); ++k)
        (*first)[order[k]] = k > 0 && pieces[order[k]] == pieces[order[k - 1]]
                                 ? (*first)[order[k - 1]]
                                 : order[k];
}

LocalPlan build_local_plan(const LocalArgs &args) {
    LocalPlan plan;
    plan.collective = args.collective;
    plan.dtype = args.dtype;
    plan.op = args.op;
    plan.writer = args.writer;
    kPlans[static_cast<size_t>(args.collective)].plan(args, &plan);
    return plan;
}

}  // namespace deputy::coll
