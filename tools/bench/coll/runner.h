// Measuring one size with one implementation.
//
// Blocking ops (OSU's osu_allreduce loop): `warmup` untimed calls, then
// `iterations` timed calls, each followed by an untimed barrier; the time of
// a row is the average over iterations, then over ranks (OSU and
// nccl-tests both average; the JSON also keeps the slowest rank).
//
// Non-blocking ops (OSU's osu_iallreduce method, mpi/collective/osu_coll.c
// in OMB 5.x, c/util/osu_util_mpi.c in 7.x):
//  1. pure communication: post + wait, `iterations` times, no barrier
//     between; each rank's average is its Pure Comm. time;
//  2. overlap: `warmup` + `iterations` rounds of post (Coll. Init), compute
//     for the rank's own pure comm. time with -t test calls spread over it,
//     wait; a barrier after each round, outside the timers. Compute is the
//     compute wall time minus the time inside the test calls;
//  3. everything averaged over iterations, then over ranks, and
//     Overlap(%) = max(0, 100 - 100 * (Overall - Compute) / Pure Comm.),
//     OSU's formula (print_stats_nbc), from the rank-averaged values;
//  4. a third pass reads CLOCK_THREAD_CPUTIME_ID around every post and
//     test of a loop that never blocks: post, the compute of pass 2 with its
//     test calls, then tests between compute slices (1/32 of the pure comm.
//     time, at least 1 us) until done. Host CPU(us) is the CPU time inside
//     the post and the test that completes (with the request's release) per
//     operation: what the offload itself costs the host. Poll CPU(us) is the
//     CPU time per test that found the operation not done yet (how many
//     there are is the caller's polling choice; JSON: polls_per_op);
//  5. a fourth pass repeats pass 2 and reads the clock around the wait:
//     Wait CPU(us), what blocking costs when the result is not there yet
//     (a sleep and an OS wake-up). The clock costs ~0.5 us per read here,
//     so it stays out of the timed passes; its own cost, calibrated at
//     start, is subtracted per call.
#pragma once

#include <cstdint>
#include <string>

#include "bench/coll/compute.h"
#include "bench/coll/impl.h"
#include "bench/coll/pattern.h"
#include "bench/coll/world.h"

namespace deputy::bench::coll {

struct Row {
    std::string impl;
    uint64_t size = 0;  // bytes (collective.h's convention)
    size_t count = 0;   // the count argument of the call
    uint64_t iterations = 0;
    uint64_t warmup = 0;
    std::string skipped;  // why this implementation did not run
    double time_us = 0;   // blocking: per call; non-blocking: Pure Comm.
    double time_max_us = 0;
    double time_p50_us = 0, time_p99_us = 0;  // blocking: single calls, the slower rank's
    double algbw = 0;  // GB/s = size / time
    double busbw = 0;
    uint64_t wrong = 0;
    bool nonblocking = false;
    double overall_us = 0, compute_us = 0, init_us = 0, test_us = 0, wait_us = 0;
    double overlap_pct = 0;
    double host_cpu_us = 0;  // post + the completing test, per operation
    double poll_cpu_us = 0;  // per test that found the operation not done
    double polls = 0;        // such tests per operation
    double wait_cpu_us = 0;  // inside the wait of the overlap loop, per operation
    std::string inter_node;  // deputy across nodes: the agents' algorithm(s) for this size
    std::string algorithm;   // sched: the src/coll algorithm that ran
    std::string load;        // --load: "alone", or the streaming teams' sizes beside it
};

struct SizeJob {
    const World *world = nullptr;
    Pattern pattern;
    CallArgs args;
    uint64_t size = 0;
    uint64_t iterations = 1;
    uint64_t warmup = 0;
    bool check_every = false;  // --check
    uint32_t test_calls = 0;   // -t
    Compute *compute = nullptr;
};

// Measures; aborts the job (every rank) when a call fails.
Row measure(Impl &impl, const SizeJob &job, bool nonblocking);

// Cost of one CLOCK_THREAD_CPUTIME_ID interval (two reads), in ns.
uint64_t calibrate_cpu_clock();

}  // namespace deputy::bench::coll
