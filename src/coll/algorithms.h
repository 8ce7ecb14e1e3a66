// The algorithm table: every schedule builder, by collective and name.
//
// Each builder lives in its own file (allreduce_ring.cc, ...) and turns one
// rank's CollectiveArgs into that rank's Schedule. Builders trust their
// arguments; build_schedule() checks them first. docs/algorithms.md gives
// each algorithm's steps and bytes moved; selector.h chooses among them.
#pragma once

#include <deputy/status.h>

#include <span>
#include <string_view>

#include "coll/collective.h"
#include "coll/schedule.h"

namespace deputy::coll {

using BuildFn = Schedule (*)(const CollectiveArgs &args);

struct Algorithm {
    Collective collective;
    const char *name;       // short, unique within the collective: "ring"
    const char *full_name;  // unique: "allreduce_ring"
    BuildFn build;
    // Whether args.chunk_bytes splits its messages. Algorithms whose every
    // message is consumed whole by nothing downstream (alltoall, barrier)
    // ignore it: pieces would only add per-message costs.
    bool pipelines;
};

Schedule build_allreduce_ring(const CollectiveArgs &args);
Schedule build_allreduce_recursive_doubling(const CollectiveArgs &args);
Schedule build_allreduce_rabenseifner(const CollectiveArgs &args);
Schedule build_reduce_scatter_ring(const CollectiveArgs &args);
Schedule build_allgather_ring(const CollectiveArgs &args);
Schedule build_allgather_recursive_doubling(const CollectiveArgs &args);
Schedule build_alltoall_pairwise(const CollectiveArgs &args);
Schedule build_alltoall_bruck(const CollectiveArgs &args);
Schedule build_bcast_binomial(const CollectiveArgs &args);
Schedule build_bcast_chain(const CollectiveArgs &args);
Schedule build_barrier_dissemination(const CollectiveArgs &args);

std::span<const Algorithm> all_algorithms();

// By short name within a collective ("ring") or by full name
// ("allreduce_ring"); nullptr when there is none.
const Algorithm *find_algorithm(Collective collective, std::string_view name);

// check_args(args), then algorithm.build(args) into *out. DP_ERR_INVALID also
// when the algorithm belongs to another collective than args.collective.
dp_status_t build_schedule(const Algorithm &algorithm, const CollectiveArgs &args, Schedule *out);

}  // namespace deputy::coll
