#include "mpi/comm_teams.h"

#include "mpi/runtime.h"
#include "mpi/tuning.h"

#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <unordered_set>

namespace deputy::mpi {
namespace {

int g_keyval = MPI_KEYVAL_INVALID;
std::mutex g_mutex;                       // the set below and CommTeam::freed
std::unordered_set<CommTeam *> g_teams;   // alive: not yet destroyed
std::atomic<uint32_t> g_next_key{0};      // this process's teams, when it is a rank 0
// Bumped whenever a communicator's team goes: every thread's cache below is
// then stale (a freed communicator's handle may come back for a new one).
std::atomic<uint64_t> g_generation{1};

// The communicator this thread called a collective on last, and its team:
// looking the attribute up costs 20-40 ns a call in Open MPI (a hash table
// under a lock), which the tuned blocking forms pay on every call.
struct LastUsed {
    MPI_Comm comm = MPI_COMM_NULL;
    CommTeam *ct = nullptr;
    uint64_t generation = 0;
};
thread_local LastUsed t_last;
// MPI_COMM_WORLD's, set once at MPI_Init (runtime_start) and kept until
// MPI_Finalize: most programs' collectives run on it, and the compare
// spares them even the thread-local lookup (a call into the dynamic linker
// from a shared library).
CommTeam *g_world = nullptr;

void destroy(CommTeam *ct) {  // g_mutex held; no request can use ct any more
    if (ct->team) dp_team_destroy(ct->team);
    destroy_tuning(ct->tuning);
    g_teams.erase(ct);
    delete ct;
}

int delete_attribute(MPI_Comm, int, void *value, void *) {
    auto *ct = static_cast<CommTeam *>(value);
    g_generation.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard lock(g_mutex);
    if (!g_teams.count(ct)) return MPI_SUCCESS;  // already destroyed by MPI_Finalize
    ct->freed = true;
    if (ct->outstanding.load(std::memory_order_acquire) == 0) destroy(ct);
    return MPI_SUCCESS;
}

CommTeam *remember(MPI_Comm comm, CommTeam *ct) {
    {
        std::lock_guard lock(g_mutex);
        g_teams.insert(ct);
    }
    PMPI_Comm_set_attr(comm, g_keyval, ct);
    return ct;
}

CommTeam *pass_all(MPI_Comm comm, CommTeam *ct, PassReason why) {
    ct->why_not = why;
    return remember(comm, ct);
}

}  // namespace

void comm_teams_start() {
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attribute, &g_keyval, nullptr);
}

CommTeam *comm_team(MPI_Comm comm, bool may_form) {
    if (comm == MPI_COMM_WORLD && g_world) return g_world;
    const uint64_t generation = g_generation.load(std::memory_order_acquire);
    if (t_last.comm == comm && t_last.generation == generation) return t_last.ct;
    void *value = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
    if (found) {
        t_last = {comm, static_cast<CommTeam *>(value), generation};
        return t_last.ct;
    }

    // Both are the same on every member: no agreement needed.
    int size = 1, inter = 0;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_test_inter(comm, &inter);
    if (!may_form && !inter && size > 1 && size <= DP_TEAM_MAX_SIZE) {
        // (Alone, forming waits for nobody: MPI_COMM_SELF forms here.)
        static CommTeam *const not_formed = [] {  // shared, never changed, never freed
            auto *shared = new CommTeam;
            shared->why_not = PassReason::team_not_formed;
            return shared;
        }();
        return not_formed;
    }
    auto *ct = new CommTeam;
    ct->size = size;
    PMPI_Comm_rank(comm, &ct->rank);
    if (inter) return pass_all(comm, ct, PassReason::intercommunicator);
    if (ct->size > DP_TEAM_MAX_SIZE) return pass_all(comm, ct, PassReason::team_too_large);

    Runtime &rt = runtime();
    // [0]: some member has no agent; [1]: the key, from rank 0 (world rank
    // and a counter of that process: unique in the job, whose secret scopes
    // team names at the agent).
    int64_t agree[2] = {rt.context ? 0 : 1, 0};
    if (ct->rank == 0)
        agree[1] = (int64_t(rt.world_rank) << 32) | g_next_key.fetch_add(1) | (int64_t(1) << 62);
    PMPI_Allreduce(MPI_IN_PLACE, agree, 2, MPI_INT64_T, MPI_MAX, comm);
    if (agree[0]) return pass_all(comm, ct, PassReason::no_agent);

    const std::string key = fmt::format("mpi:{:x}", agree[1]);
    dp_status_t st = dp_team_create(rt.context, key.c_str(), ct->rank, ct->size, &ct->team);
    int failed = st == DP_OK ? 0 : 1;
    PMPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, comm);
    if (failed) {
        // Once per kind of failure: a program that creates many
        // communicators may meet the agent's limit on every one after it.
        static std::mutex warned_mutex;
        static std::unordered_set<int> warned;
        bool first;
        {
            std::lock_guard lock(warned_mutex);
            first = warned.insert(int(st)).second;
        }
        if (st != DP_OK && first)
            warn(fmt::format("creating the team of a communicator of {} ranks failed: {}; its "
                             "collectives go to MPI (and those of any later communicator that "
                             "fails so; the report counts them)",
                             ct->size, dp_strerror(st)));
        if (ct->team) dp_team_destroy(ct->team);
        ct->team = nullptr;
        return pass_all(comm, ct, PassReason::team_failed);
    }
    return remember(comm, ct);
}

void team_use_begin(CommTeam *ct) { ct->outstanding.fetch_add(1, std::memory_order_relaxed); }

void team_use_end(CommTeam *ct) {
    if (ct->outstanding.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::lock_guard lock(g_mutex);
    if (ct->freed && g_teams.count(ct) && ct->outstanding.load() == 0) destroy(ct);
}

void world_team_start() {
    g_world = comm_team(MPI_COMM_WORLD);
    offload_p2p(g_world);
}

void offload_p2p(CommTeam *ct) {
    if (runtime().p2p && ct->team) ct->p2p = true;
}

void comm_teams_stop() {
    g_world = nullptr;
    g_generation.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard lock(g_mutex);
    while (!g_teams.empty()) destroy(*g_teams.begin());
    if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
}

}  // namespace deputy::mpi
