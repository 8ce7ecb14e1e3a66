// What the several-node plans of each collective (coll/node_<name>.cc)
// share: the team's layout over its nodes, computed once by
// build_node_plan, and the helpers that add chunked tasks. Internal to
// coll/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "coll/node_plan.h"

namespace deputy::coll {

struct NodeLayout {
    const NodeArgs &args;
    const LocalArgs &a;                 // args.collective
    const std::vector<uint32_t> &local;  // plan.local_ranks
    std::vector<uint32_t> order;         // every rank in node order (nodes, then ranks ascending)
    uint64_t element = 0, n = 0;         // element bytes; n = count x element
    uint64_t p = 0, l = 0;               // team size; ranks on this node
};

// Adds tasks of at most chunk_bytes covering [0, bytes) of a move or
// reduce whose pieces all advance together; piece(i, off) gives input i /
// output i at offset off.
template <typename In, typename Out>
void add_chunked(NodeStage &stage, uint32_t group, Task::Kind kind, uint64_t bytes,
                 const LocalArgs &a, size_t inputs, In in, size_t outputs, Out out) {
    const uint64_t element = dp_dtype_size(a.dtype);
    std::vector<Piece> ins(inputs), outs(outputs);
    for_each_chunk(bytes, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
        for (size_t i = 0; i < inputs; ++i) ins[i] = in(i, off);
        for (size_t k = 0; k < outputs; ++k) outs[k] = out(k, off);
        stage.plan.add(kind, len, ins, outs);
        stage.group_of_task.push_back(group);
    });
}

// One-to-one moves of one group, batched as the local plans batch them:
// chunks of one length share a task up to chunk_bytes, so that a thousand
// ranks' 4-byte blocks are a few tasks, not a descriptor each (one per
// block took an alltoall of 1024 ranks over 8 agents 6.5 s). The moves of
// a batch must be independent: a stage reads members and writes the
// agent's buffers, or the reverse. in(off) / out(off) give the piece at
// offset off of the block.
class MoveBatch {
  public:
    MoveBatch(NodeStage &stage, uint32_t group, const LocalArgs &a)
        : stage_(stage), group_(group), a_(a) {}
    ~MoveBatch() { flush(); }
    template <typename In, typename Out>
    void add(uint64_t bytes, In in, Out out) {
        for_each_chunk(bytes, a_.chunk_bytes, dp_dtype_size(a_.dtype),
                       [&](uint64_t off, uint64_t len) {
                           if (!ins_.empty() &&
                               (len != len_ || (ins_.size() + 1) * len > a_.chunk_bytes))
                               flush();
                           len_ = len;
                           ins_.push_back(in(off));
                           outs_.push_back(out(off));
                       });
    }
    void flush() {
        if (ins_.empty()) return;
        stage_.plan.add(Task::Kind::move, len_, ins_, outs_);
        stage_.group_of_task.push_back(group_);
        ins_.clear();
        outs_.clear();
    }

  private:
    NodeStage &stage_;
    uint32_t group_;
    const LocalArgs &a_;
    uint64_t len_ = 0;
    std::vector<Piece> ins_, outs_;
};

inline Piece agent_recv(uint64_t off) { return {Where::agent_recv, 0, off}; }

// The index, among the team's nodes, of the root's node.
inline uint32_t root_node_index(const NodeLayout &x, const NodePlan &plan) {
    return uint32_t(std::lower_bound(plan.nodes.begin(), plan.nodes.end(),
                                     x.args.node_of_rank[x.a.root]) -
                    plan.nodes.begin());
}
inline Piece agent_send(uint64_t off) { return {Where::agent_send, 0, off}; }

// A step that moves each node's ranks' blocks of n bytes as that node's
// part, in node order (allgatherv, gatherv, scatterv), rooted at the
// root's node where the kind has a root.
inline NodeExchange per_node_parts(const NodeLayout &x, const NodePlan &plan,
                                   NodeExchange::Kind kind) {
    NodeExchange e;
    e.kind = kind;
    for (const auto &rs : plan.ranks_of) e.part_bytes.push_back(rs.size() * x.n);
    // (An unrooted collective's root field means nothing: never an index.)
    if (kind != NodeExchange::Kind::allgatherv) e.root_node = root_node_index(x, plan);
    return e;
}

// A plan whose step exchanges [0, bytes) of recv once (every collective
// but the reductions, which go in pieces).
inline void one_group(NodePlan *plan, uint64_t bytes) {
    plan->groups.push_back({0, bytes});
    plan->gather.groups = plan->write_back.groups = 1;
}

// The start of every plan whose step is an allgather of the members'
// sources (allgather, gather, scan, exscan): the local sources packed into
// send in rank order, every rank's source in recv in node order
// afterwards (coll/node_allgather.cc).
void pack_local_sources(const NodeLayout &x, NodePlan *plan);

// Each collective's two functions, one file each (coll/node_<name>.cc).
using NodePlanFn = void (*)(const NodeLayout &, NodePlan *);
using NodeExchangeFn = NodeExchange (*)(const NodeLayout &, const NodePlan &, uint32_t group);

}  // namespace deputy::coll
