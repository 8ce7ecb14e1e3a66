// Communicators as deputy teams.
//
// A communicator gets its team when it is created (MPI_COMM_WORLD's at
// MPI_Init), or else at the first blocking collective on it (comm_team
// below). Every member is then inside the same collective call (MPI
// orders collectives per communicator), so the creation may itself use
// collectives on the communicator: one allreduce agrees that every member
// has an agent and hands out a key made by rank 0, the members join the team,
// and a second allreduce agrees that every join succeeded. If any step fails
// on any member, the communicator is marked "pass to MPI" on all of them,
// with the reason, and never tried again.
//
// The team lives in an attribute of the communicator (a keyval whose copy
// function copies nothing, so a dup gets its own team); MPI_Comm_free runs
// the attribute's delete callback, which destroys the team once its
// outstanding requests completed (MPI lets a communicator be freed while
// operations on it are pending).
#pragma once

#include "mpi/operations.h"

#include <deputy/coll.h>
#include <mpi.h>

#include <atomic>

namespace deputy::mpi {

struct Tuning;  // tuning.h

struct CommTeam {
    dp_team_t *team = nullptr;  // null: pass every operation on this communicator to MPI
    PassReason why_not = PassReason::no_agent;
    int rank = 0, size = 1;
    std::atomic<int> outstanding{0};  // requests posted and not yet released
    // Posted to deputy and not yet complete: deputy holds at most
    // DP_TEAM_MAX_OUTSTANDING per member, so a post beyond waits for one.
    std::atomic<int> in_flight{0};
    // Its point-to-point goes to deputy (DEPUTY_MPI_P2P=1 and the team
    // formed when the communicator was created: intercept_p2p.cc), with
    // DP_P2P_MAX_OUTSTANDING requests of its own in flight.
    bool p2p = false;
    std::atomic<int> p2p_in_flight{0};
    bool freed = false;               // the communicator is gone (under the teams' mutex)
    Tuning *tuning = nullptr;         // blocking forms tuned on it (tuning.h), or none yet
};

// Sets up the keyval; called once from runtime_start.
void comm_teams_start();
// The team of `comm`. Formed when the communicator is created (the
// library's MPI_Comm_dup, MPI_Comm_split, ...: intercept_communicators.cc),
// or else on first use by a blocking collective (`may_form`): forming is
// collective over `comm` (an MPI_Allreduce and the members' join at the
// agent), so every member must call it from the same call, and a blocking
// one: nonblocking collectives on different communicators may be started
// in different orders on different ranks, and a formation hidden in one
// of them would make those ranks wait for each other. Without a team and
// !may_form: a team of none that passes everything (team_not_formed).
CommTeam *comm_team(MPI_Comm comm, bool may_form = true);
// MPI_Init: MPI_COMM_WORLD's team (collective over it), kept for the
// lookups until comm_teams_stop.
void world_team_start();
// A communicator's team formed as the communicator was created (MPI_Init's
// world, the creations intercept_communicators.cc sees): with
// DEPUTY_MPI_P2P=1 its point-to-point goes to deputy from its first message
// on. Never for a team formed later: messages sent through MPI before
// would be overtaken.
void offload_p2p(CommTeam *team);
// A request on `team` was posted / has completed and been freed.
void team_use_begin(CommTeam *team);
void team_use_end(CommTeam *team);
// MPI_Finalize: destroys every team still alive (their requests completed).
void comm_teams_stop();

}  // namespace deputy::mpi
