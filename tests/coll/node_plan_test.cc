// Node plans (coll/node_plan.h) of alltoallv, with the nodes simulated in
// memory: each node's gather runs into its own send buffer, the exchange
// between nodes is done here by the offsets node_exchange() gives (what
// MPI_Ialltoallv does between the agents), and the write-back fills the
// members. Uneven blocks with gaps; results bit-exact, gaps untouched;
// counts that disagree across nodes are found by the receiving node.
#include "coll/node_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "coll/transport/memory/task_runner.h"
#include "coll/vector_counts.h"
#include "reference.h"
#include "vector_layout.h"

namespace deputy::coll {
namespace {

using test::Bytes;

struct Member {
    Bytes memory;  // destination, then source
    uint64_t src = 0, dst = 0;
};

// One node's view: its members (others' are absent) and its agent buffers.
class NodeBuffers final : public TaskBuffers {
  public:
    NodeBuffers(std::vector<Member> *members, const std::vector<uint32_t> &node_of_rank,
                uint32_t node, Bytes *send, Bytes *recv)
        : members_(members), node_of_rank_(node_of_rank), node_(node), send_(send), recv_(recv) {}
    uint8_t *in_place(const Piece &p, uint64_t len, bool) const override {
        Bytes *agent = p.where == Where::agent_send   ? send_
                       : p.where == Where::agent_recv ? recv_
                                                      : nullptr;
        if (agent) return p.offset + len <= agent->size() ? agent->data() + p.offset : nullptr;
        if (node_of_rank_[p.rank] != node_) return nullptr;  // not a member here
        Member &m = (*members_)[p.rank];
        const uint64_t at = (p.where == Where::source ? m.src : m.dst) + p.offset;
        return at + len <= m.memory.size() ? m.memory.data() + at : nullptr;
    }
    bool copy_in(const Piece &p, void *out, uint64_t len, std::string *why) const override {
        const uint8_t *q = in_place(p, len, false);
        if (!q) return *why = "out of range", false;
        std::memcpy(out, q, len);
        return true;
    }
    bool copy_out(const Piece &p, const void *in, uint64_t len, std::string *why) const override {
        uint8_t *q = in_place(p, len, true);
        if (!q) return *why = "out of range", false;
        std::memcpy(q, in, len);
        return true;
    }

  private:
    std::vector<Member> *members_;
    const std::vector<uint32_t> &node_of_rank_;
    uint32_t node_;
    Bytes *send_, *recv_;
};

struct Node {
    uint32_t id = 0;
    NodeArgs args;
    std::vector<MemberVector> vectors;  // local ranks filled
    NodePlan plan;
    Bytes send, recv;
};

void run_group(const NodeStage &stage, uint32_t group, const TaskBuffers &buffers,
               std::mt19937_64 &random) {
    std::vector<size_t> order;
    for (size_t i = 0; i < stage.plan.tasks.size(); ++i)
        if (stage.group_of_task[i] == group) order.push_back(i);
    std::shuffle(order.begin(), order.end(), random);
    for (size_t i : order) {
        std::string why;
        ASSERT_EQ(run_task(stage.plan, stage.plan.tasks[i], buffers, &why), DP_COMP_SUCCESS) << why;
    }
}

// What MPI_Ialltoallv does among the nodes for `group`: node a's part for
// node b lands in b's recv at b's offset for a. The sizes must agree.
void exchange_between_nodes(std::vector<Node> &nodes, uint32_t group) {
    std::vector<NodeExchange> x;
    for (Node &n : nodes) x.push_back(node_exchange(n.args, n.plan, group));
    for (size_t a = 0; a < nodes.size(); ++a)
        for (size_t b = 0; b < nodes.size(); ++b) {
            ASSERT_EQ(x[a].kind, NodeExchange::Kind::alltoallv);
            ASSERT_EQ(x[a].send_bytes[b], x[b].recv_bytes[a]) << "node " << a << " to " << b;
            std::memcpy(nodes[b].recv.data() + x[b].recv_offsets[a],
                        nodes[a].send.data() + x[a].send_offsets[b], x[a].send_bytes[b]);
        }
}

TEST(NodePlan, AlltoallvAcrossSimulatedNodesIsBitExactAndLeavesGapsAlone) {
    uint64_t seed = 77;
    const std::vector<std::vector<uint32_t>> layouts = {
        {0, 1}, {0, 1, 2, 0, 1}, {2, 2, 0, 2}, {1, 0, 1, 0, 1, 1, 0}};
    for (const auto &node_of_rank : layouts)
        for (dp_dtype_t dtype : {DP_UINT8, DP_INT32})
            for (uint64_t chunk : {uint64_t(16), uint64_t(256) << 10}) {
                const auto p = uint32_t(node_of_rank.size());
                SCOPED_TRACE("p " + std::to_string(p) + " " + dp_dtype_name(dtype) + " chunk " +
                             std::to_string(chunk) + " seed " + std::to_string(seed));
                std::mt19937_64 random(seed++);
                const uint64_t e = dp_dtype_size(dtype);
                const test::VectorLayout l = test::make_vector_layout(p, 300, 4, 1, random);
                std::vector<Member> members(p);
                std::vector<Bytes> sources(p), before(p);
                for (uint32_t r = 0; r < p; ++r) {
                    Member &m = members[r];
                    m.dst = 0;
                    m.src = l.recv_extent[r] * e;
                    m.memory =
                        test::random_bytes((l.recv_extent[r] + l.send_extent[r]) * e, random);
                    sources[r].assign(m.memory.begin() + long(m.src), m.memory.end());
                    before[r] = m.memory;
                }
                std::vector<uint32_t> ids = node_of_rank;
                std::sort(ids.begin(), ids.end());
                ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
                std::vector<Node> nodes(ids.size());
                for (size_t k = 0; k < ids.size(); ++k) {
                    Node &n = nodes[k];
                    n.id = ids[k];
                    n.vectors.resize(p);
                    for (uint32_t r = 0; r < p; ++r) {
                        if (node_of_rank[r] != n.id) continue;
                        const std::vector<uint64_t> b = test::counts_block(l, r);
                        std::string why;
                        ASSERT_EQ(decode_vector_counts(b.data(), b.size() * 8, p, e, 1ull << 36,
                                                       &n.vectors[r], &why),
                                  DP_OK);
                    }
                    n.args.collective = {Collective::alltoallv, p, 0, dtype, DP_SUM, 0, chunk};
                    n.args.collective.vectors = &n.vectors;
                    n.args.node_of_rank = node_of_rank;
                    n.args.node = n.id;
                }
                for (Node &n : nodes) {
                    n.plan = build_node_plan(n.args);
                    ASSERT_TRUE(n.plan.steps_in_order);
                    ASSERT_EQ(n.plan.groups.size(), 2u);
                    n.send.assign(n.plan.send_bytes, 0);
                    n.recv.assign(n.plan.recv_bytes, 0);
                    std::memcpy(n.send.data() + n.plan.counts_send_offset,
                                n.plan.counts_sent.data(), n.plan.counts_sent.size() * 8);
                }
                // Group 0: the counts, checked on every node.
                exchange_between_nodes(nodes, 0);
                for (Node &n : nodes)
                    ASSERT_EQ(vector_counts_difference(n.args, n.plan, n.recv.data()), "");
                // Group 1: gather, exchange, write back.
                for (Node &n : nodes) {
                    NodeBuffers b(&members, node_of_rank, n.id, &n.send, &n.recv);
                    ASSERT_EQ(std::count(n.plan.gather.group_of_task.begin(),
                                         n.plan.gather.group_of_task.end(), 0u),
                              0);
                    run_group(n.plan.gather, 1, b, random);
                }
                exchange_between_nodes(nodes, 1);
                for (Node &n : nodes) {
                    NodeBuffers b(&members, node_of_rank, n.id, &n.send, &n.recv);
                    run_group(n.plan.write_back, 1, b, random);
                }
                for (uint32_t r = 0; r < p; ++r) {
                    Bytes want = before[r];
                    for (uint32_t from = 0; from < p; ++from) {
                        const uint64_t bytes = l.counts[from][r] * e, in = l.sdispls[from][r] * e;
                        std::copy(sources[from].begin() + long(in),
                                  sources[from].begin() + long(in + bytes),
                                  want.begin() + long(l.rdispls[r][from] * e));
                    }
                    ASSERT_TRUE(members[r].memory == want) << "rank " << r;
                }
            }
}

TEST(NodePlan, AlltoallvCountsThatDisagreeAcrossNodesAreFoundByTheReceiver) {
    // Ranks 0, 2 on node 0; rank 1 on node 1. Rank 0 sends 3 elements to
    // every rank; rank 1 expects 4 from rank 0: only node 1 can tell.
    const std::vector<uint32_t> node_of_rank = {0, 1, 0};
    const uint32_t p = 3;
    std::vector<Node> nodes(2);
    for (uint32_t k = 0; k < 2; ++k) {
        Node &n = nodes[k];
        n.id = k;
        n.vectors.resize(p);
        for (uint32_t r = 0; r < p; ++r) {
            if (node_of_rank[r] != k) continue;
            MemberVector &v = n.vectors[r];
            for (uint32_t m = 0; m < p; ++m) {
                v.send.push_back({m * 3, 3});
                v.recv.push_back({m * 4, r == 1 && m == 0 ? 4u : 3u});
            }
        }
        std::vector<const MemberVector *> local;
        for (uint32_t r = 0; r < p; ++r)
            local.push_back(node_of_rank[r] == k ? &n.vectors[r] : nullptr);
        EXPECT_EQ(vector_difference(local), "") << "node " << k << " alone cannot tell";
        n.args.collective = {Collective::alltoallv, p, 0, DP_UINT8, DP_SUM, 0, 1024};
        n.args.collective.vectors = &n.vectors;
        n.args.node_of_rank = node_of_rank;
        n.args.node = k;
        n.plan = build_node_plan(n.args);
        n.send.assign(n.plan.send_bytes, 0);
        n.recv.assign(n.plan.recv_bytes, 0);
        std::memcpy(n.send.data() + n.plan.counts_send_offset, n.plan.counts_sent.data(),
                    n.plan.counts_sent.size() * 8);
    }
    exchange_between_nodes(nodes, 0);
    EXPECT_EQ(vector_counts_difference(nodes[0].args, nodes[0].plan, nodes[0].recv.data()), "");
    EXPECT_EQ(vector_counts_difference(nodes[1].args, nodes[1].plan, nodes[1].recv.data()),
              "rank 0 (node 0) sends 3 bytes to rank 1 (node 1), which expects 4");
}

}  // namespace
}  // namespace deputy::coll
