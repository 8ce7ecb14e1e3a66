#include "coll/algorithms.h"

#include <iterator>

namespace deputy::coll {
namespace {

constexpr Algorithm kAlgorithms[] = {
    {Collective::allreduce, "ring", "allreduce_ring", build_allreduce_ring, true},
    {Collective::allreduce, "recursive_doubling", "allreduce_recursive_doubling",
     build_allreduce_recursive_doubling, true},
    {Collective::allreduce, "rabenseifner", "allreduce_rabenseifner", build_allreduce_rabenseifner,
     true},
    {Collective::reduce_scatter, "ring", "reduce_scatter_ring", build_reduce_scatter_ring, true},
    {Collective::allgather, "ring", "allgather_ring", build_allgather_ring, true},
    {Collective::allgather, "recursive_doubling", "allgather_recursive_doubling",
     build_allgather_recursive_doubling, true},
    {Collective::alltoall, "pairwise", "alltoall_pairwise", build_alltoall_pairwise, false},
    {Collective::alltoall, "bruck", "alltoall_bruck", build_alltoall_bruck, false},
    {Collective::bcast, "binomial", "bcast_binomial", build_bcast_binomial, true},
    {Collective::bcast, "chain", "bcast_chain", build_bcast_chain, true},
    {Collective::barrier, "dissemination", "barrier_dissemination", build_barrier_dissemination,
     false},
};

}  // namespace

std::span<const Algorithm> all_algorithms() {
    return kAlgorithms;
}

const Algorithm *find_algorithm(Collective collective, std::string_view name) {
    for (const Algorithm &a : kAlgorithms) {
        if (a.collective == collective && (name == a.name || name == a.full_name)) return &a;
    }
    return nullptr;
}

dp_status_t build_schedule(const Algorithm &algorithm, const CollectiveArgs &args, Schedule *out) {
    if (out == nullptr || algorithm.collective != args.collective) return DP_ERR_INVALID;
    const dp_status_t status = check_args(args);
    if (status != DP_OK) return status;
    *out = algorithm.build(args);
    return DP_OK;
}

}  // namespace deputy::coll
