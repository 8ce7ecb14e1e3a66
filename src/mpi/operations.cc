#include "mpi/operations.h"

#include <array>

namespace deputy::mpi {
namespace {

// Nonblocking forms are offloaded at every size: overlap is why a program
// posts them. Blocking forms only where deputy measured faster than the MPI
// library; kNever until a measurement says otherwise (docs/mpi.md).
constexpr std::array<OperationInfo, kOperationCount> kOperations{{
    {Operation::iallreduce, "MPI_Iallreduce", "iallreduce", true, 0},
    {Operation::ireduce_scatter_block, "MPI_Ireduce_scatter_block", "ireduce_scatter_block", true, 0},
    {Operation::iallgather, "MPI_Iallgather", "iallgather", true, 0},
    {Operation::ialltoall, "MPI_Ialltoall", "ialltoall", true, 0},
    {Operation::ialltoallv, "MPI_Ialltoallv", "ialltoallv", true, 0},
    {Operation::ibcast, "MPI_Ibcast", "ibcast", true, 0},
    {Operation::ibarrier, "MPI_Ibarrier", "ibarrier", true, 0},
    {Operation::allreduce, "MPI_Allreduce", "allreduce", false, kNever},
    {Operation::reduce_scatter_block, "MPI_Reduce_scatter_block", "reduce_scatter_block", false, kNever},
    {Operation::allgather, "MPI_Allgather", "allgather", false, kNever},
    {Operation::alltoall, "MPI_Alltoall", "alltoall", false, kNever},
    {Operation::alltoallv, "MPI_Alltoallv", "alltoallv", false, kNever},
    {Operation::bcast, "MPI_Bcast", "bcast", false, kNever},
    {Operation::barrier, "MPI_Barrier", "barrier", false, kNever},
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
