// The one table of what libdeputy-mpi intercepts: each MPI operation, the
// deputy collective it becomes, and its default size threshold; and the
// reasons an operation is passed to the MPI library unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deputy::mpi {

enum class Operation : uint8_t {
    iallreduce,
    ireduce_scatter_block,
    iallgather,
    ialltoall,
    ialltoallv,
    ibcast,
    ibarrier,
    allreduce,
    reduce_scatter_block,
    allgather,
    alltoall,
    alltoallv,
    bcast,
    barrier,
    ireduce,
    iscan,
    iexscan,
    reduce,
    scan,
    exscan,
    igather,
    iscatter,
    gather,
    scatter,
    iallgatherv,
    igatherv,
    iscatterv,
    allgatherv,
    gatherv,
    scatterv,
    ireduce_scatter,
    reduce_scatter,
};
inline constexpr int kOperationCount = 32;

inline constexpr size_t kNever = SIZE_MAX;  // a threshold that offloads nothing
// A blocking form's threshold that measures instead (tuning.h).
inline constexpr size_t kTune = SIZE_MAX - 1;

struct OperationInfo {
    Operation operation;
    const char *mpi_name;  // "MPI_Iallreduce", as the report prints it
    const char *key;       // "iallreduce", as DEPUTY_MPI_THRESHOLDS names it
    bool nonblocking;
    // Offloaded from this many bytes per rank (count x type size; the whole
    // vector for allreduce, one block for the others). Measured defaults:
    // docs/mpi.md "Thresholds". Two placements (placement.h):
    size_t own_core_threshold;  // the agent runs on cores no rank of the node uses
    size_t shared_threshold;    // the agent shares the ranks' cores
};

const OperationInfo &operation_info(Operation op);
// Whether `tune` applies: the blocking forms whose members agree on a size
// (not MPI_Alltoallv).
bool tunable(Operation op);
std::optional<Operation> operation_from_key(std::string_view key);

// Why an operation went to the MPI library instead of deputy.
enum class PassReason : uint8_t {
    below_threshold,
    disabled,             // DEPUTY_MPI_DISABLE=1
    no_agent,             // this rank (or a member of the communicator) has no agent
    intercommunicator,
    team_too_large,       // more ranks than a deputy team holds
    team_failed,          // creating the communicator's team failed
    derived_datatype,     // not a predefined datatype, or one with gaps
    unsupported_datatype, // a reduction over a type deputy does not reduce
    user_op,              // not a predefined op deputy reduces (MPI_REPLACE, a user's, ...)
    in_place,             // an in-place form deputy does not run
    mixed_datatypes,      // send and receive types differ
    too_large,            // bytes beyond what one deputy operation may move
    tuning,               // a trial call of tuning (tuning.h) that MPI runs
    measured_slower,      // tuning measured deputy no faster than MPI at this size
    // A nonblocking collective on a communicator whose team is not formed
    // yet (comm_teams.h: forming it here would be a hidden blocking call).
    team_not_formed,
    bad_argument,  // an argument MPI rejects (a root out of range): MPI's error to return
};
inline constexpr int kPassReasonCount = 16;
const char *pass_reason_name(PassReason reason);  // "below threshold", as the report prints it

}  // namespace deputy::mpi
