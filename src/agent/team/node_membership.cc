// Teams whose members sit on several nodes: the agents agree on the member
// map (Internode) under a key scoped by the job's secret; this node's
// joiners wait for it, and its events (formed, failed, broken elsewhere,
// a step done) come back through poll_internode().
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"
#include "common/rank_list.h"

namespace deputy::agent {

namespace ch = channel;

std::string TeamEngine::node_key(const SecretDigest &secret, const std::string &key) {
    std::string out;
    for (uint8_t b : secret) out += fmt::format("{:02x}", b);
    return out + "/" + key;
}

std::string TeamEngine::plain_key(const std::string &node_key) {
    const size_t slash = node_key.find('/');
    return slash == std::string::npos ? node_key : node_key.substr(slash + 1);
}

void TeamEngine::join_nodes(ClientSession &s, const ch::control::TeamJoin &m,
                            const SecretDigest &secret) {
    // Across nodes the agents agree on node_key(), so members with
    // different secrets never meet in one team, and two jobs using the
    // same key each form their own.
    const std::string key = node_key(secret, m.key);
    // One rank per client, as on one node (TeamEngine::join).
    for (auto [it, last] = joining_.equal_range(key); it != last; ++it)
        if (it->second.client == s.id) {
            hooks_.send_ready(s, {m.join_id, DP_ERR_INVALID, 0,
                                  fmt::format("team '{}': this client joined it already as rank "
                                              "{} (one rank per client, i.e. per dp_context_t)",
                                              m.key, it->second.rank)}, {});
            return;
        }
    std::set<std::string> keys;
    for (const auto &[k, j] : joining_) keys.insert(k);
    if (!keys.count(key) && keys.size() >= config_.max_forming_teams) {
        hooks_.send_ready(s, {m.join_id, DP_ERR_TOO_LARGE, 0,
                              fmt::format("team '{}': {} teams are forming already "
                                          "(max_forming_teams = {})",
                                          m.key, keys.size(), config_.max_forming_teams)}, {});
        return;
    }
    joining_.insert({key, {s.id, m.rank, m.size, m.join_id}});
    ++pending_[s.id];
    const uint32_t timeout_ms =
        m.timeout_ms ? m.timeout_ms
                     : std::min(uint32_t(kDefaultTeamTimeoutMs), config_.max_team_timeout_ms);
    internode_->join(key, m.rank, m.size, timeout_ms);
    if (!config_.test_stand_in_key.empty() && m.key == config_.test_stand_in_key)
        join_stand_ins(key, m, timeout_ms);
}

void TeamEngine::join_stand_ins(const std::string &key, const ch::control::TeamJoin &m,
                                uint32_t timeout_ms) {
    // The joiner's block but the ranks a join of this node names already
    // (its own, a stand-in's, another client's).
    const uint32_t block = config_.test_stand_in_block;
    const uint32_t first = m.rank / block * block;
    const uint32_t end = uint32_t(std::min<uint64_t>(uint64_t(first) + block, m.size));
    std::vector<bool> taken(end - first);
    for (auto [it, last] = joining_.equal_range(key); it != last; ++it)
        if (it->second.rank >= first && it->second.rank < end) taken[it->second.rank - first] = true;
    uint32_t joined = 0;
    for (uint32_t r = first; r < end; ++r) {
        if (taken[r - first]) continue;
        joining_.insert({key, {0, r, m.size, 0}});
        internode_->join(key, r, m.size, timeout_ms);
        ++joined;
    }
    if (joined)
        DP_LOG_INFO("agent: team '{}': {} stand-in(s) join ranks {}-{} beside rank {} "
                    "(test_stand_in_key)",
                    m.key, joined, first, end - 1, m.rank);
}

bool TeamEngine::poll_internode() {
    if (!internode_) return false;
    bool any = false;
    InternodeEvent e;
    while (internode_->poll(&e)) {
        any = true;
        switch (e.kind) {
            case InternodeEvent::Kind::formed: on_formed(e); break;
            case InternodeEvent::Kind::join_failed: on_join_failed(e); break;
            case InternodeEvent::Kind::done: on_step_done(e); break;
            case InternodeEvent::Kind::p2p: on_node_p2p(e); break;
            case InternodeEvent::Kind::p2p_data: on_node_data(e); break;
            case InternodeEvent::Kind::p2p_sent: on_node_sent(e); break;
            case InternodeEvent::Kind::node_lost: on_node_lost(e); break;
            case InternodeEvent::Kind::broken: {
                auto it = by_uid_.find(e.team_uid);
                if (it == by_uid_.end() || !teams_.count(it->second)) break;
                Team &t = *teams_.at(it->second);
                DP_LOG_INFO("agent: team '{}' broken on another node from its operation {}: {}",
                            t.key, e.from_sequence, e.reason);
                t.broken_reason = e.reason;
                t.broken_from = std::min(t.broken_from, e.from_sequence);
                // What was posted for the operations before that stays
                // queued and runs; try_start breaks the team when it gets
                // to the first one after.
                fail_queued_from(t, t.broken_from);
                try_start(t);
                break;
            }
        }
    }
    return any;
}

void TeamEngine::on_formed(const InternodeEvent &e) {
    auto team = std::make_unique<Team>();
    Team &t = *team;
    t.id = next_team_id_++;
    t.key = plain_key(e.key);
    t.size = uint32_t(e.node_of_rank.size());
    t.ready = true;
    t.uid = e.team_uid;
    t.node_of_rank = e.node_of_rank;
    for (uint32_t r = 0; r < t.size; ++r) {
        if (t.node_of_rank[r] == internode_->node()) t.local_ranks.push_back(r);
        else t.spans_nodes = true;
    }
    t.here.resize(t.local_ranks.size());
    std::vector<uint32_t> stand_ins;
    auto [first, last] = joining_.equal_range(e.key);
    for (auto it = first; it != last;) {
        const PendingJoin &j = it->second;
        Team::Here *h = t.here_of(j.rank);
        if (h && !h->client && !h->stand_in) {
            if (j.client) {
                t.set_member(j.rank, j.client);
                h->join_id = j.join_id;
                unpend(j.client);
            } else {
                h->stand_in = true;
                stand_ins.push_back(j.rank);
            }
            it = joining_.erase(it);
        } else {
            ++it;
        }
    }
    by_uid_[t.uid] = t.id;
    DP_LOG_INFO("agent: team {} '{}' formed across the agents: {} member(s), {} here", t.id, t.key,
                t.size, t.local_ranks.size());
    teams_[t.id] = std::move(team);
    std::string gone;
    for (size_t i = 0; i < t.here.size(); ++i) {
        const Team::Here &h = t.here[i];
        ClientSession *c = h.client ? hooks_.find_client(h.client) : nullptr;
        if (c) hooks_.send_ready(*c, {h.join_id, DP_OK, t.id, ""}, {});
        else if (!h.stand_in)
            gone = fmt::format("rank {} of team '{}' left before the team formed",
                               t.local_ranks[i], t.key);
    }
    replay_parked(t.uid);
    if (!gone.empty()) break_team(t, gone);
    // Stand-ins have no memory to run an operation over: the team served
    // its purpose, forming; every operation on it fails, naming them.
    else if (!stand_ins.empty())
        break_team(t, fmt::format("ranks {} of team '{}' are stand-ins played by agent node {} "
                                  "(test mode test_stand_in_key): the team forms, it runs no "
                                  "operation",
                                  rank_list(stand_ins), t.key, internode_->node()));
}

void TeamEngine::on_join_failed(const InternodeEvent &e) {
    auto [first, last] = joining_.equal_range(e.key);
    for (auto it = first; it != last;) {
        if (e.rank != UINT32_MAX && it->second.rank != e.rank) {
            ++it;
            continue;
        }
        // The agents name the team by node_key(): members know it by its key.
        std::string reason = e.reason;
        for (size_t at; (at = reason.find(e.key)) != std::string::npos;)
            reason.replace(at, e.key.size(), plain_key(e.key));
        DP_LOG_WARN("agent: {}", reason);
        if (ClientSession *c = hooks_.find_client(it->second.client))
            hooks_.send_ready(*c, {it->second.join_id, e.status, 0, reason}, {});
        unpend(it->second.client);
        it = joining_.erase(it);
    }
}

void TeamEngine::forget_joins(uint32_t client) {
    for (auto it = joining_.begin(); it != joining_.end();)
        it = it->second.client == client ? joining_.erase(it) : std::next(it);
}

}  // namespace deputy::agent
