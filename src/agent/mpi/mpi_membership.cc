// Agents forming teams: control messages between nodes, the sequencer on
// node 0 (joins, timeouts) and a team formed or broken. Separate from the
// operations: nothing here moves a collective's bytes.
#include <fmt/format.h>

#include <deputy/coll.h>

#include <algorithm>
#include <array>
#include <functional>
#include <nlohmann/json.hpp>

#include "agent/mpi/mpi_internode.h"
#include "agent/mpi/mpi_internode_state.h"
#include "channel/coll_post.h"
#include "common/log.h"
#include "common/rank_list.h"
#include "common/runs.h"
#include "common/timing.h"

namespace deputy::agent {
namespace {

using nlohmann::json;

constexpr int kControlTag = 1;

// Ranks in the order given as runs [first, count] of consecutive ranks
// (a rank named twice starts a run of its own: the sequencer refuses it).
json rank_runs(const std::vector<uint32_t> &ranks) {
    json runs = json::array();
    for_each_run(ranks, [](uint32_t a, uint32_t b) { return b == a + 1; },
                 [&](size_t i, size_t end) {
                     runs.push_back({ranks[i], end - i});
                     return true;
                 });
    return runs;
}

// The member map as runs [node, count] of consecutive ranks on one node:
// a node per run when ranks are placed in blocks.
json map_runs(const std::vector<uint32_t> &node_of_rank) {
    json runs = json::array();
    for_each_run(node_of_rank, std::equal_to<uint32_t>(), [&](size_t i, size_t end) {
        runs.push_back({node_of_rank[i], end - i});
        return true;
    });
    return runs;
}

// The [first, count] pairs of a list of runs, or false (with nothing
// kept) for a malformed list, a run `valid` refuses, or more than
// DP_TEAM_MAX_SIZE ranks in all.
template <typename Valid>
bool read_runs(const json &runs, Valid valid, std::vector<std::array<uint32_t, 2>> *out) {
    if (!runs.is_array()) return false;
    std::vector<std::array<uint32_t, 2>> read;
    uint64_t total = 0;
    for (const json &run : runs) {
        const auto r = run.get<std::array<uint32_t, 2>>();
        if (!valid(r[0], r[1]) || (total += r[1]) > DP_TEAM_MAX_SIZE) return false;
        read.push_back(r);
    }
    *out = std::move(read);
    return true;
}

bool ranks_of_runs(const json &runs, std::vector<uint32_t> *ranks) {
    std::vector<std::array<uint32_t, 2>> read;
    auto no_wrap = [](uint32_t first, uint32_t count) {
        return uint64_t(first) + count <= UINT32_MAX;
    };
    if (!read_runs(runs, no_wrap, &read)) return false;
    for (const auto &[first, count] : read)
        for (uint32_t k = 0; k < count; ++k) ranks->push_back(first + k);
    return true;
}

bool map_of_runs(const json &runs, uint32_t nodes, std::vector<uint32_t> *map) {
    std::vector<std::array<uint32_t, 2>> read;
    auto on_a_node = [nodes](uint32_t node, uint32_t count) { return node < nodes && count > 0; };
    if (!read_runs(runs, on_a_node, &read)) return false;
    for (const auto &[node, count] : read) map->insert(map->end(), count, node);
    return true;
}

}  // namespace

void MpiInternode::send_joins(const std::string &key, uint32_t size, uint32_t timeout_ms,
                              std::vector<uint32_t> ranks) {
    if (node_ == 0) {
        for (uint32_t rank : ranks) sequencer_join(0, key, rank, size, timeout_ms);
        return;
    }
    std::sort(ranks.begin(), ranks.end());
    send_control(0, json{{"t", "join"},
                         {"key", key},
                         {"ranks", rank_runs(ranks)},
                         {"size", size},
                         {"timeout", timeout_ms}}
                        .dump());
}

void MpiInternode::send_control(uint32_t to, const std::string &message) {
    auto text = std::make_shared<std::string>(message);
    MPI_Request req;
    int rc = MPI_Isend(text->data(), int(text->size()), MPI_CHAR, int(to), kControlTag, control_,
                       &req);
    if (rc != MPI_SUCCESS) {
        DP_LOG_WARN("agent node {}: sending to node {} failed: {}", node_, to, mpi_error(rc));
        return;
    }
    sends_.emplace_back(req, std::move(text));
}

void MpiInternode::receive_control() {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, kControlTag, control_, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        std::string text(size_t(std::max(n, 0)), '\0');
        if (MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, kControlTag, control_,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        on_control(uint32_t(st.MPI_SOURCE), text);
    }
}

void MpiInternode::on_control(uint32_t from, const std::string &text) {
    // Peers are agents of the same MPI job, but a malformed message must
    // still only cost a warning.
    json m = json::parse(text, nullptr, false);
    if (m.is_discarded() || !m.is_object() || !m.contains("t")) {
        DP_LOG_WARN("agent node {}: malformed message from node {} ignored", node_, from);
        return;
    }
    try {
        const std::string t = m.at("t").get<std::string>();
        if (t == "join" && node_ == 0) {
            std::vector<uint32_t> ranks;
            if (!ranks_of_runs(m.at("ranks"), &ranks)) {
                DP_LOG_WARN("agent node {}: join from node {} ignored: its ranks are not runs "
                            "[first, count] of at most {} ranks in all, below 2^32",
                            node_, from, DP_TEAM_MAX_SIZE);
                return;
            }
            const auto key = m.at("key").get<std::string>();
            const auto size = m.at("size").get<uint32_t>();
            const auto timeout = m.at("timeout").get<uint32_t>();
            for (uint32_t rank : ranks) sequencer_join(from, key, rank, size, timeout);
        } else if (t == "formed") {
            std::vector<uint32_t> map;
            if (!map_of_runs(m.at("map"), nodes_, &map)) {
                DP_LOG_WARN("agent node {}: malformed member map from node {} ignored", node_,
                            from);
                return;
            }
            on_formed(m.at("key").get<std::string>(), m.at("uid").get<uint64_t>(), map);
        } else if (t == "join_failed") {
            InternodeEvent e;
            e.kind = InternodeEvent::Kind::join_failed;
            e.key = m.at("key").get<std::string>();
            e.rank = m.at("rank").get<uint32_t>();
            e.status = dp_status_t(m.at("status").get<int>());
            e.reason = m.at("reason").get<std::string>();
            push_event(std::move(e));
        } else if (t == "broken") {
            on_broken(m.at("uid").get<uint64_t>(), m.at("from").get<uint64_t>(),
                      m.at("why").get<std::string>());
        } else {
            DP_LOG_WARN("agent node {}: unknown message '{}' from node {}", node_, t, from);
        }
    } catch (const json::exception &e) {
        DP_LOG_WARN("agent node {}: bad message from node {}: {}", node_, from, e.what());
    }
}

void MpiInternode::sequencer_join(uint32_t from, const std::string &key, uint32_t rank,
                                  uint32_t size, uint32_t timeout_ms) {
    auto refuse = [&](dp_status_t status, const std::string &why) {
        json m{{"t", "join_failed"}, {"key", key}, {"rank", rank}, {"status", int(status)},
               {"reason", why}};
        if (from == node_) on_control(node_, m.dump());
        else send_control(from, m.dump());
    };
    auto [it, fresh] = forming_.try_emplace(key);
    Forming &f = it->second;
    if (fresh) {
        f.size = size;
        f.node_of_rank.assign(size, UINT32_MAX);
        f.timeout_ms = timeout_ms;
        f.deadline_ns = timing::now_ns() + uint64_t(timeout_ms) * 1'000'000;
    }
    if (f.size != size)
        return refuse(DP_ERR_MISMATCH,
                      fmt::format("team '{}' has size {}; this member says {}", key, f.size, size));
    if (rank >= size)
        return refuse(DP_ERR_INVALID, fmt::format("team '{}': rank {} is not in 0..{}", key, rank,
                                                  size - 1));
    if (f.node_of_rank[rank] != UINT32_MAX)
        return refuse(DP_ERR_INVALID, fmt::format("team '{}': rank {} joined already (on node {})",
                                                  key, rank, f.node_of_rank[rank]));
    f.node_of_rank[rank] = from;
    if (++f.joined < f.size) return;
    const uint64_t uid = next_uid_++;
    std::vector<uint32_t> map = f.node_of_rank;
    forming_.erase(it);
    std::vector<uint32_t> nodes = map;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    const std::string formed =
        json{{"t", "formed"}, {"key", key}, {"uid", uid}, {"map", map_runs(map)}}.dump();
    for (uint32_t n : nodes)
        if (n != node_) send_control(n, formed);
    if (std::find(nodes.begin(), nodes.end(), node_) != nodes.end()) on_formed(key, uid, map);
}

void MpiInternode::sequencer_timeouts() {
    const uint64_t now = timing::now_ns();
    for (auto it = forming_.begin(); it != forming_.end();) {
        const Forming &f = it->second;
        if (now < f.deadline_ns) {
            ++it;
            continue;
        }
        std::vector<uint32_t> missing, nodes;
        for (uint32_t r = 0; r < f.size; ++r) {
            if (f.node_of_rank[r] == UINT32_MAX) missing.push_back(r);
            else nodes.push_back(f.node_of_rank[r]);
        }
        const std::string why = fmt::format(
            "team '{}': {} of {} members joined within {} ms on {} node(s); missing rank(s) {}",
            it->first, f.joined, f.size, f.timeout_ms, nodes_, rank_list(missing));
        std::sort(nodes.begin(), nodes.end());
        nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
        const std::string m = json{{"t", "join_failed"}, {"key", it->first}, {"rank", UINT32_MAX},
                                   {"status", int(DP_ERR_TIMEOUT)}, {"reason", why}}
                                  .dump();
        it = forming_.erase(it);
        for (uint32_t n : nodes) {
            if (n == node_) on_control(node_, m);
            else send_control(n, m);
        }
    }
}

void MpiInternode::on_formed(const std::string &key, uint64_t uid,
                             const std::vector<uint32_t> &map) {
    auto t = std::make_unique<TeamComm>();
    t->nodes = map;
    std::sort(t->nodes.begin(), t->nodes.end());
    t->nodes.erase(std::unique(t->nodes.begin(), t->nodes.end()), t->nodes.end());
    t->index = uint32_t(std::find(t->nodes.begin(), t->nodes.end(), node_) - t->nodes.begin());
    if (t->nodes.size() > 1) {
        // Collective over the team's nodes only; they all get here in the
        // order the sequencer formed the teams.
        MPI_Group world, group;
        MPI_Comm_group(control_, &world);
        std::vector<int> ranks(t->nodes.begin(), t->nodes.end());
        MPI_Group_incl(world, int(ranks.size()), ranks.data(), &group);
        int rc = MPI_Comm_create_group(control_, group, int(10 + uid % 30000), &t->comm);
        MPI_Group_free(&group);
        MPI_Group_free(&world);
        if (rc != MPI_SUCCESS) {
            t->dead_from = 0;
            t->dead_reason = "creating the team's communicator failed: " + mpi_error(rc);
        } else {
            MPI_Comm_set_errhandler(t->comm, MPI_ERRORS_RETURN);
        }
    }
    InternodeEvent e;
    e.kind = InternodeEvent::Kind::formed;
    e.key = key;
    e.team_uid = uid;
    e.node_of_rank = map;
    teams_[uid] = std::move(t);
    ++teams_formed_;
    push_event(std::move(e));
}

void MpiInternode::on_broken(uint64_t uid, uint64_t from_sequence, const std::string &why) {
    auto it = teams_.find(uid);
    if (it == teams_.end() || from_sequence >= it->second->dead_from) return;
    TeamComm &t = *it->second;
    t.dead_from = from_sequence;
    t.dead_reason = why;
    // Requests of collectives cannot be cancelled or freed (MPI 3.1
    // §5.12): the ones in flight from that sequence on are abandoned with
    // the team; the earlier ones, which the breaking node still does its
    // part of, complete.
    for (auto op = t.ops.begin(); op != t.ops.end();) {
        if (!t.dead_for(op->op.sequence)) {
            ++op;
            continue;
        }
        finish(*op, channel::kCollMemberLost, why);
        op = t.ops.erase(op);
    }
    InternodeEvent e;
    e.kind = InternodeEvent::Kind::broken;
    e.team_uid = uid;
    e.reason = why;
    e.from_sequence = from_sequence;
    push_event(std::move(e));
}

}  // namespace deputy::agent
