// A collective among the members of one node, as a plan of independent
// tasks over the members' buffers: what the agent runs when it can reach
// every member's memory (mapped in place, or ordinary memory copied through
// its process), and, with the agent's own buffers, the steps on each node
// of a collective that spans several (gather before the exchange between
// agents, write-back after it).
//
// A task is a small piece of work an engine runs whole, in any order with
// the others and on any engine; tasks never touch a common byte that one
// of them writes, so every execution gives the same bytes. Two kinds:
//   reduce  out = in[0] op in[1] op ... op in[k-1], in this order (rank
//           order, so floats are bit-exact and equal on every member
//           whoever runs the task), written to every output;
//   move    with one input, its bytes to every output (a broadcast); with k
//           inputs and k outputs, input i to output i. Every input is read
//           before any output is written (so a task may swap two blocks:
//           an in-place alltoall).
// Pieces name a buffer (a member's source or destination, or the agent's
// send or receive buffer) and an offset in it; every piece of a task is
// `bytes` long. Plans are cut in tasks of at most chunk_bytes (whole
// elements), so several engines share one operation and operations of other
// teams interleave with it.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "coll/collective.h"

namespace deputy::coll {

struct MemberVector;  // coll/vector_counts.h

enum class Where : uint8_t { source, destination, agent_send, agent_recv };

struct Piece {
    Where where = Where::source;
    uint32_t rank = 0;  // the member (source, destination); unused for the agent's buffers
    uint64_t offset = 0;
    friend bool operator==(const Piece &, const Piece &) = default;
};

struct Task {
    enum class Kind : uint8_t { reduce, move };
    Kind kind = Kind::move;
    uint64_t bytes = 0;
    uint32_t first_input = 0, inputs = 0;    // into LocalPlan::pieces
    uint32_t first_output = 0, outputs = 0;  // into LocalPlan::pieces
    // Some input is named twice (the runner reads it once): found as the
    // plan is built, so that the runner of a reused plan looks only then.
    bool repeats = false;
};

// Per piece, the index of the first piece equal to it (itself if none
// before it). Sorts: fit for thousands of pieces.
void first_equal(std::span<const Piece> pieces, std::vector<uint32_t> *first);

struct LocalPlan {
    Collective collective = Collective::barrier;
    dp_dtype_t dtype = DP_UINT8;
    dp_op_t op = DP_SUM;
    std::vector<Task> tasks;
    std::vector<Piece> pieces;
    uint64_t max_task_bytes = 0;  // scratch a runner may need per piece
    // LocalArgs::writer's: add() keeps only its share of each task.
    std::optional<uint32_t> writer = std::nullopt;

    std::span<const Piece> inputs(const Task &t) const {
        return {pieces.data() + t.first_input, t.inputs};
    }
    std::span<const Piece> outputs(const Task &t) const {
        return {pieces.data() + t.first_output, t.outputs};
    }
    // Bytes its tasks read and write in all.
    uint64_t traffic_bytes() const {
        uint64_t total = 0;
        for (const Task &t : tasks) total += t.bytes * (uint64_t(t.inputs) + t.outputs);
        return total;
    }
    // Appends a task (pieces given whole); in a writer's plan, only the
    // writer's share of it (its outputs, and the inputs they need), if any.
    void add(Task::Kind kind, uint64_t bytes, std::span<const Piece> in,
             std::span<const Piece> out);

  private:
    void append(Task::Kind kind, uint64_t bytes, std::span<const Piece> in,
                std::span<const Piece> out);
};

struct LocalArgs {
    Collective collective = Collective::barrier;
    uint32_t size = 1;  // team size P: ranks 0..P-1 are all on this node
    uint64_t count = 0;
    dp_dtype_t dtype = DP_UINT8;
    dp_op_t op = DP_SUM;
    uint32_t root = 0;
    uint64_t chunk_bytes = 256 << 10;  // at most, per task (whole elements, at least one)
    // alltoallv: every rank's blocks, by rank (count is not used), checked
    // to agree (vector_difference). Across nodes only the local ranks'.
    const std::vector<MemberVector> *vectors = nullptr;
    // Set: the plan holds only what writes this member's destination: the
    // whole plan's tasks that do, each cut to its outputs there and the
    // inputs they take (a member running its part of the operation,
    // client/rank_execution.cc: at small counts an alltoall is one task of
    // n^2 moves, of which it needs n).
    std::optional<uint32_t> writer = std::nullopt;
    // Same arguments, same plan, except for a vector collective (whose
    // blocks are behind `vectors`, not compared).
    friend bool operator==(const LocalArgs &, const LocalArgs &) = default;
};

// The plan for a collective whose every member is on this node. Arguments
// are trusted (the agent checked the members' heads).
LocalPlan build_local_plan(const LocalArgs &args);

// The pieces of [0, total) bytes of chunk_bytes or less, whole elements.
// Calls f(offset, bytes) for each.
template <typename F>
void for_each_chunk(uint64_t total, uint64_t chunk_bytes, uint64_t element, F f) {
    const uint64_t whole = chunk_bytes / element * element;
    const uint64_t chunk = whole != 0 ? whole : element;
    for (uint64_t off = 0; off < total; off += chunk)
        f(off, total - off < chunk ? total - off : chunk);
}

}  // namespace deputy::coll
