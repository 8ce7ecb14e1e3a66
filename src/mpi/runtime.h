// The process-wide state of libdeputy-mpi: whether this rank talks to an
// agent, its context, the thresholds and what was offloaded or passed.
//
// Set up in MPI_Init / MPI_Init_thread (after PMPI_Init) and torn down in
// MPI_Finalize (before PMPI_Finalize); every intercepted call reads it.
#pragma once

#include "mpi/operations.h"
#include "mpi/p2p_calls.h"
#include "mpi/placement.h"

#include <deputy/context.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <string>

namespace deputy::mpi {

struct OperationCounters {
    std::atomic<uint64_t> offloaded{0};
    std::array<std::atomic<uint64_t>, kPassReasonCount> passed{};
};

struct Runtime {
    bool initialized = false;  // MPI_Init went through this library
    bool disabled = false;     // DEPUTY_MPI_DISABLE=1
    bool require = false;      // DEPUTY_MPI_REQUIRE=1: no agent is fatal
    bool thread_multiple = false;
    int world_rank = 0, world_size = 1;
    dp_context_t *context = nullptr;  // null: no agent, everything passes
    std::string agent;                // the socket this rank attached to
    // Where the agents run, agreed by every rank of MPI_COMM_WORLD: shared
    // if on any node the agent shares a rank's cores. It picks the default
    // thresholds; DEPUTY_MPI_THRESHOLDS overrides them one by one.
    Placement placement = Placement::shared;
    bool placement_given = false;  // DEPUTY_MPI_PLACEMENT, not measured
    // More of this node's ranks may run on this rank's CPUs than there are
    // CPUs: its waits yield at once (placement.h, ranks_crowd_my_cpus).
    bool crowded = false;
    std::array<size_t, kOperationCount> thresholds{};
    std::array<OperationCounters, kOperationCount> counters;
    // DEPUTY_MPI_P2P=1: communicators' point-to-point goes to deputy
    // (intercept_p2p.cc); the calls offloaded.
    bool p2p = false;
    std::array<std::atomic<uint64_t>, kP2pCallCount> p2p_offloaded{};
    std::string report;  // DEPUTY_MPI_REPORT: "", "1" or "json:DIR"
};

// One per process, constructed when the library is loaded (before any MPI
// call can reach it); a global rather than a function's static so that the
// pass-through path reads it without a guard check.
extern Runtime g_runtime;
inline Runtime &runtime() { return g_runtime; }

// Called once from the MPI_Init wrappers after PMPI_Init succeeded.
void runtime_start(int provided_thread_level);
// Called from the MPI_Finalize wrapper before PMPI_Finalize: completes what
// is outstanding, destroys teams, prints the report, detaches.
void runtime_stop();

// The report's counters. Below MPI_THREAD_MULTIPLE one thread at a time
// calls MPI, so a plain load and store count exactly and spare the locked
// add (with g_runtime above, the pass-through went from 11 to 8 ns per
// call: docs/PERFORMANCE.md, "Pass-through").
inline void count(std::atomic<uint64_t> &counter) {
    if (runtime().thread_multiple)
        counter.fetch_add(1, std::memory_order_relaxed);
    else
        counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
inline void count_offloaded(Operation op) { count(runtime().counters[size_t(op)].offloaded); }
inline void count_passed(Operation op, PassReason why) {
    count(runtime().counters[size_t(op)].passed[size_t(why)]);
}

// Prints "deputy-mpi: rank R: <message>" on stderr.
void warn(const std::string &message);
// A failure the program cannot recover from: the message, then MPI_Abort.
[[noreturn]] void fatal(const std::string &message);

// DEPUTY_MPI_THRESHOLDS ("allreduce=64k,iallgather=0"): the thresholds over
// the defaults; a malformed value is an error naming it.
bool parse_thresholds(const char *text, std::array<size_t, kOperationCount> *thresholds,
                      std::string *error);

}  // namespace deputy::mpi
