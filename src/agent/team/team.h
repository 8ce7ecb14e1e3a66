// The state TeamEngine keeps per team and per running operation, shared by
// team_engine.cc (membership, queues, agreement), coll_execution.cc (one
// node) and team_engine_nodes.cc (several nodes).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/coll_tasks.h"
#include "agent/team_engine.h"
#include "channel/team_board.h"
#include "channel/coll_post.h"
#include "coll/collective.h"
#include "coll/local_plan.h"
#include "coll/node_plan.h"
#include "coll/vector_counts.h"
#include "common/segment.h"
#include "mover/names.h"

namespace deputy::agent {

// What a post names and whether posts agree: channel/coll_post.h (the
// members running an operation themselves check the same).
using channel::collective_name_of;
using channel::collective_of;
using channel::head_difference;
using channel::head_invalid;
using channel::kMaxCollBytes;

inline constexpr uint64_t kDefaultTeamTimeoutMs = 30000;

// A member's post as the agent queued it: the slot's 64 bytes and, for a
// vector collective, its counts block as copied from the member's pool
// when the post arrived. That copy is the one read of the block: the checks
// and the plan use it, never the member's memory, which it may rewrite.
struct TeamEngine::Posted {
    channel::CollPost post{};
    std::vector<uint8_t> counts;
    uint8_t counts_status = 0;  // not 0: no copy, and the status the operation fails with
};

// The digest a team keeps of its job secret (BLAKE2b-256): with the key, it
// names the forming team a joiner belongs to; the secret itself is never
// stored or shown.
using SecretDigest = std::array<uint8_t, 32>;
SecretDigest secret_digest(const std::string &secret);

struct TeamEngine::Execution {
    std::vector<channel::CollPost> heads;  // by rank (local ranks filled)
    coll::Collective collective = coll::Collective::barrier;
    uint64_t bytes = 0;  // bytes a member receives (counters)
    // The members' memory the engines' tasks touch: held until the last
    // task finished, whoever of them leaves meanwhile.
    std::vector<std::shared_ptr<ClientMemory>> memories;
    MemberBuffers buffers;
    // alltoallv: each local rank's blocks, decoded from the agent's copy
    // of its counts block (by rank; other nodes' ranks empty).
    std::vector<coll::MemberVector> vectors;
    // One node: the plan and its tasks.
    coll::LocalPlan plan;
    TaskSet tasks;
    // Several nodes: the stages around the steps between agents, the
    // agent's buffers (shared with the abandoned list if the team breaks:
    // MPI may still write into them), the steps out (step id -> group) and
    // the groups whose step came back.
    bool spans_nodes = false;
    coll::NodeArgs node_args;
    coll::NodePlan node_plan;
    TaskSet gather, write_back;
    std::shared_ptr<std::vector<uint8_t>> send, recv;
    std::map<uint64_t, uint32_t> steps;
    uint32_t steps_posted = 0, steps_done = 0;
    bool checked = false;  // the first step carried the heads' check
    uint8_t node_status = DP_COMP_SUCCESS;
    std::string node_reason;

    // One node: the arguments `plan` was built for. A team posting the
    // same collective again (a loop, the common case) gets its last
    // execution back (Team::spare) and the plan with it, instead of
    // allocating both again for every operation.
    std::optional<coll::LocalArgs> planned_for;

    // Nothing of it is with the engines.
    bool idle() const { return tasks.idle() && gather.idle() && write_back.idle(); }
    // Ready for the team's next operation: nothing of the last one is held
    // (its members' memory above all); the plan and the capacity stay.
    void recycle() {
        collective = coll::Collective::barrier;
        bytes = 0;
        memories.clear();
        buffers.members.clear();
        buffers.send = buffers.recv = nullptr;
        buffers.send_bytes = buffers.recv_bytes = 0;
        buffers.through_process = false;
        vectors.clear();
    }
};

struct TeamEngine::Team {
    uint32_t id = 0;
    std::string key;
    SecretDigest secret{};
    uint32_t size = 0;
    std::vector<uint32_t> members;  // client id per rank; 0: not (or no longer) there
    // Per rank, the join id its member's TEAM_JOIN carried: the answer
    // carries it back (a client may wait for several joins at once, of
    // different teams).
    std::vector<uint64_t> join_ids;
    std::vector<std::deque<Posted>> queues;
    // Per rank, how many of its member's posts the agent took (queued,
    // started or failed): the sequence of its next is one more.
    std::vector<uint64_t> posts;
    bool ready = false;
    bool broken = false;
    std::string broken_reason;
    // Broken on another node from this operation sequence on: the
    // operations before it run (that node does its part), the rest fail.
    uint64_t broken_from = UINT64_MAX;
    uint64_t deadline_ns = 0;
    uint32_t timeout_ms = 0;
    std::unique_ptr<Execution> running;
    std::unique_ptr<Execution> spare;  // one node: the last one finished, recycled
    std::vector<Posted> next;          // the heads try_start takes, reused
    bool starting = false;  // inside try_start()
    uint64_t ops = 0;
    // Several nodes: the agents' name for the team, where each rank is, and
    // the ranks on this node (all ranks when the team is on one node).
    uint64_t uid = 0;
    std::vector<uint32_t> node_of_rank;
    std::vector<uint32_t> local_ranks;
    bool spans_nodes = false;
    std::map<std::string, uint64_t> inter_algorithms;  // inter-node steps run, by algorithm
    // One node: the board on which waiting members may run operations
    // themselves (channel/team_board.h, rank_execution.cc); not valid when
    // the agent runs every operation.
    Segment board_segment;
    channel::TeamBoard board;
    uint64_t rank_ops = 0;  // operations the members ran
};

}  // namespace deputy::agent
