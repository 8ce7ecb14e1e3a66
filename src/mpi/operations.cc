#include "mpi/operations.h"

#include <array>

namespace deputy::mpi {
namespace {

// Where deputy measured faster than the MPI library, in each placement
// (docs/mpi.md "Thresholds", scripts/mpi-thresholds.py from the runs of
// scripts/perf-mpi.sh). With a core of its own the agent overlaps what the
// program posts, so every nonblocking form is offloaded; sharing the ranks'
// cores it is offloaded only from where it did not lose to MPI with the
// ranks computing on every core nor with them idle.
constexpr std::array<OperationInfo, kOperationCount> kOperations{{
    // operation                    MPI name                      key                      nonblocking own core  shared
    {Operation::iallreduce,           "MPI_Iallreduce",            "iallreduce",            true,  0,       0},
    {Operation::ireduce_scatter_block, "MPI_Ireduce_scatter_block", "ireduce_scatter_block", true,  0,       0},
    {Operation::iallgather,           "MPI_Iallgather",            "iallgather",            true,  0,       0},
    {Operation::ialltoall,            "MPI_Ialltoall",             "ialltoall",             true,  0,       0},
    {Operation::ialltoallv,           "MPI_Ialltoallv",            "ialltoallv",            true,  0,       0},
    {Operation::ibcast,               "MPI_Ibcast",                "ibcast",                true,  0,       0},
    {Operation::ibarrier,             "MPI_Ibarrier",              "ibarrier",              true,  0,       0},
    {Operation::allreduce,            "MPI_Allreduce",             "allreduce",             false, kNever,  kNever},
    {Operation::reduce_scatter_block, "MPI_Reduce_scatter_block",  "reduce_scatter_block",  false, kNever,  kNever},
    {Operation::allgather,            "MPI_Allgather",             "allgather",             false, kNever,  kNever},
    {Operation::alltoall,             "MPI_Alltoall",              "alltoall",              false, kNever,  kNever},
    {Operation::alltoallv,            "MPI_Alltoallv",             "alltoallv",             false, kNever,  kNever},
    {Operation::bcast,                "MPI_Bcast",                 "bcast",                 false, kNever,  kNever},
    {Operation::barrier,              "MPI_Barrier",               "barrier",               false, kNever,  kNever},
}};

constexpr std::array<const char *, kPassReasonCount> kReasons{
    "below threshold",        "disabled",           "no agent",
    "intercommunicator",      "team larger than deputy's maximum", "team creation failed",
    "derived datatype",       "datatype deputy does not reduce",   "user-defined op",
    "in place",               "send and receive datatypes differ", "too large",
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

const char *pass_reason_name(PassReason reason) { return kReasons[size_t(reason)]; }

}  // namespace deputy::mpi
