// The state TeamEngine keeps per team and per running operation, shared by
// team_engine.cc (one node) and team_engine_nodes.cc (several nodes).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/team_engine.h"
#include "channel/coll_desc.h"
#include "mover/names.h"

namespace deputy::agent {

// Bytes a member reads and writes for one collective of `count` elements.
struct CollLengths {
    uint64_t src = 0, dst = 0;
};

inline CollLengths coll_lengths(uint8_t opcode, uint64_t count, uint64_t esize, uint64_t p) {
    const uint64_t n = count * esize;
    switch (opcode) {
        case channel::kCollAllreduce: return {n, n};
        case channel::kCollReduceScatter: return {p * n, n};
        case channel::kCollAllgather: return {n, p * n};
        case channel::kCollAlltoall: return {p * n, p * n};
        case channel::kCollBcast: return {n, n};
        default: return {0, 0};
    }
}

// How two members' heads differ (empty: they agree), for DP_COMP_MISMATCH.
inline std::string head_difference(const dp_desc_t &a, const dp_desc_t &b) {
    namespace ch = channel;
    if (b.opcode != a.opcode)
        return fmt::format("operation {} vs {}", ch::coll_opcode_name(a.opcode),
                           ch::coll_opcode_name(b.opcode));
    if (b.size != a.size) return fmt::format("count {} vs {}", a.size, b.size);
    if (b.dtype != a.dtype) return fmt::format("dtype {} vs {}", a.dtype, b.dtype);
    if (ch::coll_reduces(a.opcode) && b.redop != a.redop)
        return fmt::format("reduction {} vs {}", a.redop, b.redop);
    if (a.opcode == ch::kCollBcast && b.aux != a.aux)
        return fmt::format("root {} vs {}", a.aux, b.aux);
    return {};
}

inline constexpr uint64_t kDefaultTeamTimeoutMs = 30000;

// A completion status for fields out of range in agreed heads; 0 if fine.
inline constexpr uint64_t kMaxCollBytes = 1ull << 36;
inline uint8_t head_invalid(const dp_desc_t &h, uint32_t team_size) {
    namespace ch = channel;
    const uint64_t esize = mover::dtype_size(h.dtype);
    if (h.opcode < ch::kCollFirst || h.opcode > ch::kCollLast) return DP_COMP_INVALID_OPCODE;
    if (h.opcode != ch::kCollBarrier &&
        (esize == 0 || (ch::coll_reduces(h.opcode) && h.redop >= DP_OP_COUNT) ||
         (h.opcode == ch::kCollBcast && h.aux >= team_size)))
        return DP_COMP_INVALID_FIELD;
    if (h.size > kMaxCollBytes / std::max<uint64_t>(esize, 1) / team_size)
        return DP_COMP_INVALID_SIZE;
    return 0;
}

// The digest a team keeps of its job secret (BLAKE2b-256): joiners are
// compared against it, and the secret itself is never stored or shown.
using SecretDigest = std::array<uint8_t, 32>;
SecretDigest secret_digest(const std::string &secret);
bool same_digest(const SecretDigest &a, const SecretDigest &b);  // constant time

struct TeamEngine::Execution {
    std::vector<dp_desc_t> heads;
    // The members' memory the engines' batches point into: held until the
    // last batch completed, whoever of them leaves meanwhile.
    std::vector<std::shared_ptr<ClientMemory>> memories;
    std::vector<std::vector<dp_desc_t>> batches;
    std::unique_ptr<dp_completion_t[]> records;
    size_t submitted = 0;
    uint64_t bytes = 0;
    // Several nodes: the agent's buffers for the inter-node step (shared
    // with the abandoned list if the team breaks), the steps still out (one
    // per chunk) and the chunk each step covers.
    bool node_step = false;
    std::shared_ptr<std::vector<uint8_t>> send, recv;
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> steps;  // step id -> [offset, bytes)
    uint8_t node_status = DP_COMP_SUCCESS;
    std::string node_reason;
};

struct TeamEngine::Team {
    uint32_t id = 0;
    std::string key;
    SecretDigest secret{};
    uint32_t size = 0;
    std::vector<uint32_t> members;  // client id per rank; 0: not (or no longer) there
    std::vector<std::deque<dp_desc_t>> queues;
    bool ready = false;
    bool broken = false;
    std::string broken_reason;
    uint64_t deadline_ns = 0;
    uint32_t timeout_ms = 0;
    std::unique_ptr<Execution> running;
    uint64_t ops = 0;
    // Several nodes: the agents' name for the team, where each rank is, and
    // the ranks on this node (all ranks when the team is on one node).
    uint64_t uid = 0;
    std::vector<uint32_t> node_of_rank;
    std::vector<uint32_t> local_ranks;
    bool spans_nodes = false;
    std::map<std::string, uint64_t> inter_algorithms;  // inter-node steps run, by algorithm
};

}  // namespace deputy::agent
