// alltoallv across nodes: as alltoall, each block with its own length, in
// two steps in order: group 0 exchanges the counts, so that each node can
// check what its ranks receive against what the senders (on other nodes)
// send, and group 1 the data, carrying the verdict (node_plan.h).
#include <fmt/format.h>

#include <cstring>

#include "coll/node_plan_parts.h"
#include "coll/vector_counts.h"

namespace deputy::coll {

void plan_node_alltoallv(const NodeLayout &x, NodePlan *plan) {
    const LocalArgs &a = x.a;
    const std::vector<MemberVector> &v = *a.vectors;
    const size_t nodes = plan->ranks_of.size();
    plan->steps_in_order = true;
    plan->gather.groups = plan->write_back.groups = 2;
    plan->groups = {{0, 0}, {0, 0}};
    NodeExchange counts, data;
    counts.kind = data.kind = NodeExchange::Kind::alltoallv;
    // To node k: for each local source i, its blocks for k's ranks.
    uint64_t sent = 0;
    MoveBatch gather(plan->gather, 1, a);
    for (const auto &rs : plan->ranks_of) {
        data.send_offsets.push_back(sent);
        for (uint32_t i : x.local)
            for (uint32_t j : rs) {
                const VectorBlock &b = v[i].send[j];
                const uint64_t to = sent;
                gather.add(
                    b.bytes, [&](uint64_t off) { return Piece{Where::source, i, b.offset + off}; },
                    [&](uint64_t off) { return agent_send(to + off); });
                sent += b.bytes;
                plan->counts_sent.push_back(b.bytes);
            }
        data.send_bytes.push_back(sent - data.send_offsets.back());
    }
    // From node k: for each of its ranks i, its block for each local rank.
    gather.flush();
    uint64_t received = 0;
    MoveBatch write_back(plan->write_back, 1, a);
    for (const auto &rs : plan->ranks_of) {
        data.recv_offsets.push_back(received);
        for (uint32_t i : rs)
            for (uint32_t j : x.local) {
                const VectorBlock &b = v[j].recv[i];
                const uint64_t from = received;
                write_back.add(
                    b.bytes, [&](uint64_t off) { return agent_recv(from + off); },
                    [&](uint64_t off) { return Piece{Where::destination, j, b.offset + off}; });
                received += b.bytes;
                plan->counts_expected.push_back(b.bytes);
            }
        data.recv_bytes.push_back(received - data.recv_offsets.back());
    }
    // The counts after the data, 8-aligned, in the same order.
    plan->counts_send_offset = (sent + 7) / 8 * 8;
    plan->counts_recv_offset = (received + 7) / 8 * 8;
    uint64_t counts_sent = 0, counts_received = 0;
    for (size_t k = 0; k < nodes; ++k) {
        const uint64_t n_sent = x.l * plan->ranks_of[k].size() * 8;
        const uint64_t n_received = plan->ranks_of[k].size() * x.l * 8;
        counts.send_offsets.push_back(plan->counts_send_offset + counts_sent);
        counts.send_bytes.push_back(n_sent);
        counts.recv_offsets.push_back(plan->counts_recv_offset + counts_received);
        counts.recv_bytes.push_back(n_received);
        counts_sent += n_sent;
        counts_received += n_received;
    }
    plan->send_bytes = plan->counts_send_offset + counts_sent;
    plan->recv_bytes = plan->counts_recv_offset + counts_received;
    plan->vector_steps = {std::move(counts), std::move(data)};
}

NodeExchange exchange_node_alltoallv(const NodeLayout &, const NodePlan &plan, uint32_t group) {
    return plan.vector_steps[group];
}

std::string vector_counts_difference(const NodeArgs &args, const NodePlan &plan,
                                     const uint8_t *recv) {
    size_t at = 0;
    for (size_t k = 0; k < plan.ranks_of.size(); ++k)
        for (uint32_t i : plan.ranks_of[k])
            for (uint32_t j : plan.local_ranks) {
                uint64_t sent;
                std::memcpy(&sent, recv + plan.counts_recv_offset + at * 8, sizeof sent);
                const uint64_t expected = plan.counts_expected[at++];
                if (sent != expected)
                    return fmt::format("rank {} (node {}) sends {} bytes to rank {} (node {}), "
                                       "which expects {}",
                                       i, plan.nodes[k], sent, j, args.node, expected);
            }
    return {};
}

}  // namespace deputy::coll
