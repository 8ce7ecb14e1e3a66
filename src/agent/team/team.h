// A team as the agent keeps it: its members and where they are, each
// member's queue of posts, the operation running (execution.h) and, on one
// node, the board on which waiting members may run operations themselves
// (board_policy.cc).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/p2p.h"
#include "channel/team_board.h"
#include "channel/coll_post.h"
#include "coll/collective.h"
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

struct TeamEngine::Team {
    uint32_t id = 0;
    std::string key;
    SecretDigest secret{};
    uint32_t size = 0;
    std::vector<uint32_t> members;  // client id per rank; 0: not (or no longer) there
    // Its inverse, the rank of each client that is a member here: a post
    // finds its member in O(1) whatever the team's size. Both change
    // through set_member() only.
    std::unordered_map<uint32_t, uint32_t> rank_of;
    void set_member(uint32_t rank, uint32_t client) {
        if (members[rank] != 0) rank_of.erase(members[rank]);
        members[rank] = client;
        if (client != 0) rank_of[client] = rank;
    }
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
    // A member joined saying it leaves every operation to the agent
    // (channel::control::kJoinAgentRuns): no board, no views.
    bool agent_runs_all = false;
    uint64_t rank_ops = 0;  // operations the members ran
    // Point-to-point messages (p2p.h), made by the first post.
    std::unique_ptr<P2pQueues> p2p;
};

}  // namespace deputy::agent
