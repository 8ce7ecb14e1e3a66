#include "coll/local_plan.h"

#include <iterator>

namespace deputy::coll {

// The one-node plan of each collective, one file each (local_<name>.cc).
void plan_local_allreduce(const LocalArgs &args, LocalPlan *plan);
void plan_local_reduce_scatter(const LocalArgs &args, LocalPlan *plan);
void plan_local_allgather(const LocalArgs &args, LocalPlan *plan);
void plan_local_alltoall(const LocalArgs &args, LocalPlan *plan);
void plan_local_bcast(const LocalArgs &args, LocalPlan *plan);
void plan_local_alltoallv(const LocalArgs &args, LocalPlan *plan);
// A barrier moves no bytes: agreeing on it is all there is.
void plan_local_barrier(const LocalArgs &, LocalPlan *) {}

namespace {

using PlanFn = void (*)(const LocalArgs &, LocalPlan *);
// Indexed by Collective.
constexpr PlanFn kPlans[] = {plan_local_allreduce, plan_local_reduce_scatter,
                             plan_local_allgather, plan_local_alltoall,
                             plan_local_bcast,     plan_local_barrier,
                             plan_local_alltoallv};
static_assert(std::size(kPlans) == kCollectiveCount, "a local plan for every collective");

}  // namespace

void LocalPlan::add(Task::Kind kind, uint64_t bytes, std::span<const Piece> in,
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
    tasks.push_back(t);
    if (bytes > max_task_bytes) max_task_bytes = bytes;
}

LocalPlan build_local_plan(const LocalArgs &args) {
    LocalPlan plan;
    plan.collective = args.collective;
    plan.dtype = args.dtype;
    plan.op = args.op;
    kPlans[static_cast<size_t>(args.collective)](args, &plan);
    return plan;
}

}  // namespace deputy::coll
