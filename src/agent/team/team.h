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
    // This node's members in rank order: here[i] is rank local_ranks[i]
    // (every rank when the team is on one node). Nothing is kept per rank
    // of other nodes but the member map (node_of_rank), so a node's share
    // of a large team grows with its own members.
    struct Here {
        uint32_t client = 0;  // 0: not (or no longer) there
        // The join id its TEAM_JOIN carried: the answer carries it back (a
        // client may wait for several joins at once, of different teams).
        uint64_t join_id = 0;
        std::deque<Posted> queue;
        // How many of its posts the agent took (queued, started or failed):
        // the sequence of its next is one more.
        uint64_t posts = 0;
        uint64_t counts_bytes = 0;  // of the counts blocks copied into `queue`
        bool stand_in = false;      // played by the agent (test mode): no client, no memory
    };
    std::vector<uint32_t> local_ranks;  // ascending
    std::vector<Here> here;
    // The rank of each client that is a member here: a post finds its
    // member in O(1) whatever the team's size. Changes through
    // set_member() only.
    std::unordered_map<uint32_t, uint32_t> rank_of;
    // Rank `rank`'s member if it is one of this node's ranks, else nullptr.
    const Here *here_of(uint32_t rank) const {
        if (rank < local_ranks.size() && local_ranks[rank] == rank) return &here[rank];  // one node
        auto it = std::lower_bound(local_ranks.begin(), local_ranks.end(), rank);
        return it != local_ranks.end() && *it == rank ? &here[size_t(it - local_ranks.begin())]
                                                      : nullptr;
    }
    Here *here_of(uint32_t rank) {
        return const_cast<Here *>(static_cast<const Team *>(this)->here_of(rank));
    }
    // Its index in `here`, UINT32_MAX for another node's rank.
    uint32_t slot_of(uint32_t rank) const {
        const Here *h = here_of(rank);
        return h ? uint32_t(h - here.data()) : UINT32_MAX;
    }
    // Its client, 0 if none (another node's rank, or one that left).
    uint32_t client_of(uint32_t rank) const {
        const Here *h = here_of(rank);
        return h ? h->client : 0;
    }
    void set_member(uint32_t rank, uint32_t client) {
        Here &h = *here_of(rank);
        if (h.client != 0) rank_of.erase(h.client);
        h.client = client;
        if (client != 0) rank_of[client] = rank;
    }
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
    // Several nodes: the agents' name for the team and where each rank is.
    uint64_t uid = 0;
    std::vector<uint32_t> node_of_rank;
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
