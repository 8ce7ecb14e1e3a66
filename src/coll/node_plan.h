// The two local stages of a collective whose team spans several nodes (one
// agent per node; docs/nodes.md): each node's agent gathers its members'
// part into its own buffers (the gather plan), the agents exchange them
// (an inter-node step: MPI between agents), and each agent writes the
// results back to its members (the write-back plan). Both are LocalPlans
// (coll/local_plan.h) whose pieces name the agent's send and receive
// buffers beside the members' buffers; every task carries the stage's
// group it belongs to, so a reduction can go chunk by chunk: group k of the
// gather, then the step of chunk k, then group k of the write-back, while
// the next chunks are still being gathered.
//
// Layouts of the agent's buffers (n = count x element bytes, P the team,
// L the ranks on this node, nodes in ascending id, ranks ascending):
//   allreduce       recv: n bytes, the local partial reduction, then the whole
//   reduce_scatter  recv: P x n, likewise; member r keeps block r
//   allgather       send: the L local sources; recv: every rank's block, in
//                   node order then rank order
//   alltoall        send: for each node k, for each local source i, its blocks
//                   for k's ranks; recv: from each node, for each of its ranks,
//                   one block per local rank
//   bcast           recv: the root's data (gathered there by the root's node)
//   barrier         nothing
//   alltoallv       as alltoall, each block with its own length: send: for
//                   each node k, for each local source i, its blocks for k's
//                   ranks; recv: from each node, for each of its ranks, its
//                   block for each local rank. Then, 8-aligned, the counts:
//                   send: for each node k, for each local source i, the
//                   bytes of its blocks for k's ranks; recv: from each node,
//                   for each of its ranks, the bytes it sends each local
//                   rank (which that rank's recv entry must equal).
//
// alltoallv takes two steps, in order: group 0 exchanges the counts (each
// node then checks what its ranks receive against what they expect: the
// senders' counts live on other nodes), group 1 the data, and its check
// carries the verdict, so a disagreement anywhere fails every node before
// a byte moves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {

struct NodeArgs {
    LocalArgs collective;                // size: the whole team
    std::vector<uint32_t> node_of_rank;  // per rank of the team
    uint32_t node = 0;                   // this agent's node id
    uint64_t stage_bytes = 4 << 20;      // a reduction goes to the other nodes in pieces this big
};

// The step between agents for one group of a plan: a collective among the
// team's nodes (in node order) over the agent's buffers, as offsets into
// send and recv; the agents' transport (MPI) carries it out.
struct NodeExchange {
    enum class Kind : uint8_t { allreduce, allgatherv, alltoallv, bcast, barrier, reduce,
                                gatherv, scatterv };
    Kind kind = Kind::barrier;
    // allreduce: `elements` at recv_offset of recv, reduced in place;
    // reduce: the same, the result on the node at index root_node only.
    uint64_t recv_offset = 0, elements = 0;
    // bcast: `bytes` of recv from the node at index root_node.
    uint64_t bytes = 0;
    uint32_t root_node = 0;
    // allgatherv: this node's part is all of send; every node's part
    // (part_bytes, per node) lands in recv, concatenated in node order.
    // gatherv: the same, in the recv of the node at index root_node only.
    // scatterv: the node at root_node holds every node's part in send,
    // concatenated in node order; each node's lands at the start of its recv.
    std::vector<uint64_t> part_bytes;
    // alltoallv: the part for node k is send_bytes[k] at send_offsets[k] of
    // send; node k's part lands at recv_offsets[k] of recv.
    std::vector<uint64_t> send_offsets, send_bytes, recv_offsets, recv_bytes;
};

struct NodeStage {
    LocalPlan plan;
    std::vector<uint32_t> group_of_task;  // per task
    uint32_t groups = 0;
};

struct NodePlan {
    NodeStage gather, write_back;
    uint64_t send_bytes = 0, recv_bytes = 0;  // the agent's buffers
    // The part [offset, +bytes) of recv that the step of each group
    // exchanges (a reduction's chunks; one group, the whole, otherwise).
    struct Exchange {
        uint64_t offset, bytes;
    };
    std::vector<Exchange> groups;
    std::vector<uint32_t> local_ranks;    // ascending
    std::vector<uint32_t> nodes;          // the team's node ids, ascending
    std::vector<std::vector<uint32_t>> ranks_of;  // per node index, ascending
    // A group's step starts only once the step before it completed
    // (alltoallv: the data step carries the check of the counts).
    bool steps_in_order = false;
    // alltoallv: each group's exchange, computed with the layout; the
    // counts this node sends (the agent writes them at counts_send_offset
    // of send before group 0) and those its ranks expect at
    // counts_recv_offset of recv (vector_counts_difference).
    std::vector<NodeExchange> vector_steps;
    // What the agents' first check compares in place of the count, when
    // the operation's counts never travel between them (0: the count):
    // reduce_scatterv's digest of its counts (coll/vector_counts.h).
    uint64_t check_digest = 0;
    std::vector<uint64_t> counts_sent, counts_expected;
    uint64_t counts_send_offset = 0, counts_recv_offset = 0;
};

// Trusted arguments (the agent checked the heads); every rank of
// node_of_rank[...] == node is a local member.
NodePlan build_node_plan(const NodeArgs &args);

// The step between agents for one group of a plan.
NodeExchange node_exchange(const NodeArgs &args, const NodePlan &plan, uint32_t group);

// alltoallv, after group 0's step: whether the counts that arrived in
// `recv` (the agent's receive buffer) are those this node's ranks expect.
// Empty if so, else the first pair that disagrees.
std::string vector_counts_difference(const NodeArgs &args, const NodePlan &plan,
                                     const uint8_t *recv);

}  // namespace deputy::coll
