#include "mpi/operations.h"

#include <array>

namespace deputy::mpi {
namespace {

// Where deputy measured no slower than the MPI library, in each placement
// (docs/mpi.md "Thresholds": scripts/mpi-thresholds.sh, 2 ranks, medians of
// 3 runs, every larger size too, with the ranks computing on every core and
// idle; where two sessions' runs disagreed, the larger value), with the
// agent's defaults (two engines when nothing is pinned). Sharing the ranks'
// cores the agent gets a core only while a rank waits: small operations cost
// more than MPI's (its latency is a few us, deputy's a wake-up and a
// hand-over), and allgather / alltoall, which MPI does with one copy per
// peer, win only where the two engines copy on both cores the waiting ranks
// leave. Alltoallv has no size the ranks agree on (their counts differ) and
// is offloaded only at threshold 0; a barrier carries no bytes and follows
// the smallest sizes. With a core of its own every nonblocking form is
// offloaded (overlap is what it is posted for; it never measured slower
// than MPI from 64 KiB). The blocking forms' values were measured again
// once waits for operations up to 256 KiB yielded before sleeping
// (client/context.h), which made the offloaded 64-256 KiB calls 1.5-3x
// faster: for sizes up to 256 KiB that session's values replace the older
// ones, above it the larger of the sessions' still holds (docs/mpi.md). The
// shared column was measured again once ranks in MPI_Wait ran operations
// of at most 256 KiB on each other's heap buffers themselves (no hand-over
// to the agent: four nonblocking forms from 64 KiB at 0.06-0.90x MPI), by
// the same rule; and again once they ran them up to 4 MiB (agent config
// rank_execution_bytes), from the medians of 9 runs in three sessions:
// MPI_Ialltoall from 32 KiB (0.40-0.92x at every size from there, was
// 8 MiB), MPI_Alltoall from 512 KiB (256 KiB 1.22x), MPI_Allgather from
// 64 KiB, MPI_Reduce_scatter_block from 32 KiB. The shared column of the
// blocking forms that lost at 256 KiB-1 MiB was measured again once waits
// yielded up to 4 MiB (client/context.h), 3 runs at 2 and 3 at 4 ranks,
// the larger: MPI_Alltoall from 32 KiB, MPI_Bcast, MPI_Reduce, MPI_Scan and
// MPI_Gather from 64 KiB (0.20-0.76x from there, 3-200x below, where the
// benchmark's buffers are below the shared heap's 64 KiB).
constexpr size_t K = 1024, M = 1024 * 1024;
constexpr std::array<OperationInfo, kOperationCount> kOperations{{
    // operation                    MPI name                      key                      nonblocking own core  shared
    {Operation::iallreduce,           "MPI_Iallreduce",            "iallreduce",            true,  0,       64 * K},
    {Operation::ireduce_scatter_block, "MPI_Ireduce_scatter_block", "ireduce_scatter_block", true,  0,       64 * K},
    {Operation::iallgather,           "MPI_Iallgather",            "iallgather",            true,  0,       64 * K},
    {Operation::ialltoall,            "MPI_Ialltoall",             "ialltoall",             true,  0,       32 * K},
    {Operation::ialltoallv,           "MPI_Ialltoallv",            "ialltoallv",            true,  0,       kNever},
    {Operation::ibcast,               "MPI_Ibcast",                "ibcast",                true,  0,       64 * K},
    {Operation::ibarrier,             "MPI_Ibarrier",              "ibarrier",              true,  0,       kNever},
    {Operation::allreduce,            "MPI_Allreduce",             "allreduce",             false, 64 * K,  64 * K},
    {Operation::reduce_scatter_block, "MPI_Reduce_scatter_block",  "reduce_scatter_block",  false, 64 * K,  32 * K},
    {Operation::allgather,            "MPI_Allgather",             "allgather",             false, 1 * M,   64 * K},
    {Operation::alltoall,             "MPI_Alltoall",              "alltoall",              false, 8 * M,   32 * K},
    {Operation::alltoallv,            "MPI_Alltoallv",             "alltoallv",             false, kNever,  kNever},
    {Operation::bcast,                "MPI_Bcast",                 "bcast",                 false, 1 * M,   64 * K},
    {Operation::barrier,              "MPI_Barrier",               "barrier",               false, kNever,  kNever},
    // Measured with scripts/mpi-thresholds.sh (2026-11-28: 3 runs at 2
    // ranks and 3 at 4 ranks on 2 cores, shared; 3 runs own core for the
    // blocking forms), the larger of the two rank counts: igather from
    // 512 KiB (256 KiB 1.16x at 2 ranks, idle); the others from 64 KiB as
    // the operations they were borrowed from. (The blocking forms' shared
    // column again after the yield change: above.)
    {Operation::ireduce,              "MPI_Ireduce",               "ireduce",               true,  0,       64 * K},
    {Operation::iscan,                "MPI_Iscan",                 "iscan",                 true,  0,       64 * K},
    {Operation::iexscan,              "MPI_Iexscan",               "iexscan",               true,  0,       64 * K},
    {Operation::reduce,               "MPI_Reduce",                "reduce",                false, 64 * K,  64 * K},
    {Operation::scan,                 "MPI_Scan",                  "scan",                  false, 64 * K,  64 * K},
    {Operation::exscan,               "MPI_Exscan",                "exscan",                false, 64 * K,  64 * K},
    {Operation::igather,              "MPI_Igather",               "igather",               true,  0,       512 * K},
    {Operation::iscatter,             "MPI_Iscatter",              "iscatter",              true,  0,       64 * K},
    {Operation::gather,               "MPI_Gather",                "gather",                false, 1 * M,   64 * K},
    {Operation::scatter,              "MPI_Scatter",               "scatter",               false, 1 * M,   64 * K},
    // The vector forms: allgatherv by its mean block (allgather's unit),
    // measured with scripts/mpi-thresholds.sh once the waiting members ran
    // vector plans themselves (shared: 0.31-0.77x MPI from 64 KiB with
    // every core computing, 2-80x below), the blocking form on shared cores
    // again once waits yielded up to 4 MiB (client/context.h; 2 and 4
    // ranks: 0.87x at 64 KiB, 0.48-0.52x from 256 KiB; it lost 1.42x at
    // 256 KiB before); gatherv and scatterv, whose counts only the root has,
    // as alltoallv (0 or never: below 64 KiB they lose 2-80x on shared
    // cores, so never there).
    {Operation::iallgatherv,          "MPI_Iallgatherv",           "iallgatherv",           true,  0,       64 * K},
    {Operation::igatherv,             "MPI_Igatherv",              "igatherv",              true,  0,       kNever},
    {Operation::iscatterv,            "MPI_Iscatterv",             "iscatterv",             true,  0,       kNever},
    {Operation::allgatherv,           "MPI_Allgatherv",            "allgatherv",            false, 1 * M,   64 * K},
    {Operation::gatherv,              "MPI_Gatherv",               "gatherv",               false, kNever,  kNever},
    {Operation::scatterv,             "MPI_Scatterv",              "scatterv",              false, kNever,  kNever},
    // By the largest count: reduce_scatter_block's values (deputy-bench-mpi
    // times the block form only; its 4-rank run gave 16 / 32 KiB).
    {Operation::ireduce_scatter,      "MPI_Ireduce_scatter",       "ireduce_scatter",       true,  0,       64 * K},
    {Operation::reduce_scatter,       "MPI_Reduce_scatter",        "reduce_scatter",        false, 64 * K,  32 * K},
}};

constexpr std::array<const char *, kPassReasonCount> kReasons{
    "below threshold",        "disabled",           "no agent",
    "intercommunicator",      "team larger than deputy's maximum", "team creation failed",
    "derived datatype",       "datatype deputy does not reduce",   "user-defined op",
    "in place",               "send and receive datatypes differ", "too large",
    "tuning trial",           "measured slower",                   "team not formed yet",
    "invalid argument (MPI's error)",
};

constexpr bool table_in_order() {
    for (int i = 0; i < kOperationCount; ++i)
        if (int(kOperations[size_t(i)].operation) != i) return false;
    return true;
}
static_assert(table_in_order(), "kOperations must list operations in enum order");

}  // namespace

const OperationInfo &operation_info(Operation op) { return kOperations[size_t(op)]; }

std::optional<Operation> operation_from_key(std::string_view key) {
    for (const OperationInfo &info : kOperations)
        if (key == info.key) return info.operation;
    return std::nullopt;
}

bool tunable(Operation op) {
    return !operation_info(op).nonblocking && op != Operation::alltoallv &&
           op != Operation::gatherv && op != Operation::scatterv;
}

const char *pass_reason_name(PassReason reason) { return kReasons[size_t(reason)]; }

}  // namespace deputy::mpi
