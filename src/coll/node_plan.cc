#include "coll/node_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "coll/vector_counts.h"

namespace deputy::coll {
namespace {

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

Piece recv(uint64_t off) { return {Where::agent_recv, 0, off}; }
Piece send(uint64_t off) { return {Where::agent_send, 0, off}; }

}  // namespace

NodePlan build_node_plan(const NodeArgs &args) {
    const LocalArgs &a = args.collective;
    NodePlan plan;
    for (NodeStage *s : {&plan.gather, &plan.write_back}) {
        s->plan.collective = a.collective;
        s->plan.dtype = a.dtype;
        s->plan.op = a.op;
    }
    for (uint32_t r = 0; r < a.size; ++r)
        if (args.node_of_rank[r] == args.node) plan.local_ranks.push_back(r);
    plan.nodes = args.node_of_rank;
    std::sort(plan.nodes.begin(), plan.nodes.end());
    plan.nodes.erase(std::unique(plan.nodes.begin(), plan.nodes.end()), plan.nodes.end());
    plan.ranks_of.resize(plan.nodes.size());
    for (uint32_t r = 0; r < a.size; ++r)
        plan.ranks_of[size_t(std::lower_bound(plan.nodes.begin(), plan.nodes.end(),
                                              args.node_of_rank[r]) -
                             plan.nodes.begin())]
            .push_back(r);
    // Every rank in node order (nodes ascending, ranks ascending in each).
    std::vector<uint32_t> order;
    for (const auto &rs : plan.ranks_of) order.insert(order.end(), rs.begin(), rs.end());

    const std::vector<uint32_t> &local = plan.local_ranks;
    const uint64_t element = dp_dtype_size(a.dtype);
    const uint64_t n = a.count * element;
    const uint64_t p = a.size, l = local.size();
    auto one_group = [&](uint64_t bytes) {
        plan.groups.push_back({0, bytes});
        plan.gather.groups = plan.write_back.groups = 1;
    };
    switch (a.collective) {
        case Collective::allreduce:
        case Collective::reduce_scatter: {
            // Reduce everything here (P blocks for reduce_scatter), exchange
            // it in stage_bytes pieces, keep ours.
            const uint64_t total = a.collective == Collective::allreduce ? n : p * n;
            plan.recv_bytes = total;
            uint32_t group = 0;
            for_each_chunk(total, args.stage_bytes, element, [&](uint64_t base, uint64_t len) {
                plan.groups.push_back({base, len});
                add_chunked(
                    plan.gather, group, Task::Kind::reduce, len, a, l,
                    [&](size_t i, uint64_t off) { return Piece{Where::source, local[i], base + off}; },
                    1, [&](size_t, uint64_t off) { return recv(base + off); });
                for (uint32_t r : local) {
                    // The part of this piece that is member r's result.
                    const uint64_t lo = a.collective == Collective::allreduce
                                            ? base
                                            : std::max<uint64_t>(base, r * n);
                    const uint64_t hi = a.collective == Collective::allreduce
                                            ? base + len
                                            : std::min<uint64_t>(base + len, (r + 1) * n);
                    if (lo >= hi) continue;
                    const uint64_t shift = a.collective == Collective::allreduce ? 0 : r * n;
                    add_chunked(
                        plan.write_back, group, Task::Kind::move, hi - lo, a, 1,
                        [&](size_t, uint64_t off) { return recv(lo + off); }, 1,
                        [&](size_t, uint64_t off) {
                            return Piece{Where::destination, r, lo - shift + off};
                        });
                }
                ++group;
            });
            plan.gather.groups = plan.write_back.groups = group;
            if (group == 0) one_group(0);
            break;
        }
        case Collective::allgather: {
            plan.send_bytes = l * n;
            plan.recv_bytes = p * n;
            one_group(p * n);
            for (size_t i = 0; i < l; ++i)
                add_chunked(
                    plan.gather, 0, Task::Kind::move, n, a, 1,
                    [&](size_t, uint64_t off) { return Piece{Where::source, local[i], off}; }, 1,
                    [&](size_t, uint64_t off) { return send(i * n + off); });
            for (size_t i = 0; i < p; ++i)
                add_chunked(
                    plan.write_back, 0, Task::Kind::move, n, a, 1,
                    [&](size_t, uint64_t off) { return recv(i * n + off); }, l,
                    [&](size_t j, uint64_t off) {
                        return Piece{Where::destination, local[j], order[i] * n + off};
                    });
            break;
        }
        case Collective::alltoall: {
            plan.send_bytes = l * p * n;
            plan.recv_bytes = p * l * n;
            one_group(0);
            // To node k: for each local source i, its blocks for k's ranks.
            uint64_t part = 0;
            for (const auto &rs : plan.ranks_of) {
                for (size_t i = 0; i < l; ++i)
                    for (size_t j = 0; j < rs.size(); ++j) {
                        const uint64_t to = part + (i * rs.size() + j) * n;
                        add_chunked(
                            plan.gather, 0, Task::Kind::move, n, a, 1,
                            [&](size_t, uint64_t off) {
                                return Piece{Where::source, local[i], rs[j] * n + off};
                            },
                            1, [&](size_t, uint64_t off) { return send(to + off); });
                    }
                part += l * rs.size() * n;
            }
            // From each rank i (node order), one block per local rank j.
            for (size_t i = 0; i < p; ++i)
                for (size_t j = 0; j < l; ++j)
                    add_chunked(
                        plan.write_back, 0, Task::Kind::move, n, a, 1,
                        [&](size_t, uint64_t off) { return recv((i * l + j) * n + off); }, 1,
                        [&](size_t, uint64_t off) {
                            return Piece{Where::destination, local[j], order[i] * n + off};
                        });
            break;
        }
        case Collective::bcast: {
            plan.recv_bytes = n;
            one_group(n);
            if (args.node_of_rank[a.root] == args.node)
                add_chunked(
                    plan.gather, 0, Task::Kind::move, n, a, 1,
                    [&](size_t, uint64_t off) { return Piece{Where::source, a.root, off}; }, 1,
                    [&](size_t, uint64_t off) { return recv(off); });
            std::vector<uint32_t> others;
            for (uint32_t r : local)
                if (r != a.root) others.push_back(r);
            if (!others.empty())
                add_chunked(
                    plan.write_back, 0, Task::Kind::move, n, a, 1,
                    [&](size_t, uint64_t off) { return recv(off); }, others.size(),
                    [&](size_t j, uint64_t off) {
                        return Piece{Where::destination, others[j], off};
                    });
            break;
        }
        case Collective::barrier:
            one_group(0);
            break;
        case Collective::alltoallv: {
            const std::vector<MemberVector> &v = *a.vectors;
            const size_t nodes = plan.ranks_of.size();
            plan.steps_in_order = true;
            plan.gather.groups = plan.write_back.groups = 2;
            plan.groups = {{0, 0}, {0, 0}};
            NodeExchange counts, data;
            counts.kind = data.kind = NodeExchange::Kind::alltoallv;
            // To node k: for each local source i, its blocks for k's ranks.
            uint64_t sent = 0;
            for (const auto &rs : plan.ranks_of) {
                data.send_offsets.push_back(sent);
                for (uint32_t i : local)
                    for (uint32_t j : rs) {
                        const VectorBlock &b = v[i].send[j];
                        const uint64_t to = sent;
                        add_chunked(
                            plan.gather, 1, Task::Kind::move, b.bytes, a, 1,
                            [&](size_t, uint64_t off) {
                                return Piece{Where::source, i, b.offset + off};
                            },
                            1, [&](size_t, uint64_t off) { return send(to + off); });
                        sent += b.bytes;
                        plan.counts_sent.push_back(b.bytes);
                    }
                data.send_bytes.push_back(sent - data.send_offsets.back());
            }
            // From node k: for each of its ranks i, its block for each local rank.
            uint64_t received = 0;
            for (const auto &rs : plan.ranks_of) {
                data.recv_offsets.push_back(received);
                for (uint32_t i : rs)
                    for (uint32_t j : local) {
                        const VectorBlock &b = v[j].recv[i];
                        const uint64_t from = received;
                        add_chunked(
                            plan.write_back, 1, Task::Kind::move, b.bytes, a, 1,
                            [&](size_t, uint64_t off) { return recv(from + off); }, 1,
                            [&](size_t, uint64_t off) {
                                return Piece{Where::destination, j, b.offset + off};
                            });
                        received += b.bytes;
                        plan.counts_expected.push_back(b.bytes);
                    }
                data.recv_bytes.push_back(received - data.recv_offsets.back());
            }
            // The counts after the data, 8-aligned, in the same order.
            plan.counts_send_offset = (sent + 7) / 8 * 8;
            plan.counts_recv_offset = (received + 7) / 8 * 8;
            uint64_t counts_sent = 0, counts_received = 0;
            for (size_t k = 0; k < nodes; ++k) {
                const uint64_t n_sent = l * plan.ranks_of[k].size() * 8;
                const uint64_t n_received = plan.ranks_of[k].size() * l * 8;
                counts.send_offsets.push_back(plan.counts_send_offset + counts_sent);
                counts.send_bytes.push_back(n_sent);
                counts.recv_offsets.push_back(plan.counts_recv_offset + counts_received);
                counts.recv_bytes.push_back(n_received);
                counts_sent += n_sent;
                counts_received += n_received;
            }
            plan.send_bytes = plan.counts_send_offset + counts_sent;
            plan.recv_bytes = plan.counts_recv_offset + counts_received;
            plan.vector_steps = {std::move(counts), std::move(data)};
            break;
        }
    }
    return plan;
}

NodeExchange node_exchange(const NodeArgs &args, const NodePlan &plan, uint32_t group) {
    const LocalArgs &a = args.collective;
    const uint64_t element = dp_dtype_size(a.dtype);
    const uint64_t n = a.count * element;
    NodeExchange x;
    switch (a.collective) {
        case Collective::allreduce:
        case Collective::reduce_scatter:
            x.kind = NodeExchange::Kind::allreduce;
            x.recv_offset = plan.groups[group].offset;
            x.elements = plan.groups[group].bytes / element;
            break;
        case Collective::allgather:
            x.kind = NodeExchange::Kind::allgatherv;
            for (const auto &rs : plan.ranks_of) x.part_bytes.push_back(rs.size() * n);
            break;
        case Collective::alltoall: {
            x.kind = NodeExchange::Kind::alltoallv;
            const uint64_t local = plan.local_ranks.size();
            uint64_t sent = 0, received = 0;
            for (const auto &rs : plan.ranks_of) {
                x.send_offsets.push_back(sent);
                x.send_bytes.push_back(local * rs.size() * n);
                sent += x.send_bytes.back();
                x.recv_offsets.push_back(received);
                x.recv_bytes.push_back(rs.size() * local * n);
                received += x.recv_bytes.back();
            }
            break;
        }
        case Collective::bcast:
            x.kind = NodeExchange::Kind::bcast;
            x.bytes = n;
            x.root_node = uint32_t(std::lower_bound(plan.nodes.begin(), plan.nodes.end(),
                                                    args.node_of_rank[a.root]) -
                                   plan.nodes.begin());
            break;
        case Collective::barrier:
            x.kind = NodeExchange::Kind::barrier;
            break;
        case Collective::alltoallv:
            x = plan.vector_steps[group];
            break;
    }
    return x;
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
