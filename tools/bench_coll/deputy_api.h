// The collective half of the deputy API as this benchmark uses it.
//
// Until the agent's collectives are in every build, the symbols of coll.h are
// referenced weakly (the executable links the whole deputy core, so any
// that exist are found): a build without them still runs the MPI
// baselines, and asking for deputy says plainly that this build has no
// collectives instead of failing to link.
#pragma once

#include <deputy/coll.h>
#include <deputy/context.h>

#pragma weak dp_team_create
#pragma weak dp_team_destroy
#pragma weak dp_iallreduce
#pragma weak dp_ireduce_scatter
#pragma weak dp_iallgather
#pragma weak dp_ialltoall
#pragma weak dp_ibcast
#pragma weak dp_ibarrier
#pragma weak dp_test
#pragma weak dp_wait
#pragma weak dp_request_free
#pragma weak dp_allreduce
#pragma weak dp_reduce_scatter
#pragma weak dp_allgather
#pragma weak dp_alltoall
#pragma weak dp_bcast
#pragma weak dp_barrier

namespace deputy::bench::coll {

// The first coll.h function this build lacks, or nullptr when it has all.
inline const char *missing_coll_symbol() {
#define DEPUTY_BENCH_COLL_NEED(f) \
    if (reinterpret_cast<void *>(&f) == nullptr) return #f;
    DEPUTY_BENCH_COLL_NEED(dp_team_create)
    DEPUTY_BENCH_COLL_NEED(dp_team_destroy)
    DEPUTY_BENCH_COLL_NEED(dp_iallreduce)
    DEPUTY_BENCH_COLL_NEED(dp_ireduce_scatter)
    DEPUTY_BENCH_COLL_NEED(dp_iallgather)
    DEPUTY_BENCH_COLL_NEED(dp_ialltoall)
    DEPUTY_BENCH_COLL_NEED(dp_ibcast)
    DEPUTY_BENCH_COLL_NEED(dp_ibarrier)
    DEPUTY_BENCH_COLL_NEED(dp_test)
    DEPUTY_BENCH_COLL_NEED(dp_wait)
    DEPUTY_BENCH_COLL_NEED(dp_request_free)
    DEPUTY_BENCH_COLL_NEED(dp_allreduce)
    DEPUTY_BENCH_COLL_NEED(dp_reduce_scatter)
    DEPUTY_BENCH_COLL_NEED(dp_allgather)
    DEPUTY_BENCH_COLL_NEED(dp_alltoall)
    DEPUTY_BENCH_COLL_NEED(dp_bcast)
    DEPUTY_BENCH_COLL_NEED(dp_barrier)
#undef DEPUTY_BENCH_COLL_NEED
    return nullptr;
}

}  // namespace deputy::bench::coll
