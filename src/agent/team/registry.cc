// The registry of teams, TeamEngine's public face: joins and forming on one
// node (several nodes: node_membership.cc), leaves, clients gone, forming
// timeouts, and the service thread's turn over every team (progress(), the
// executions orphaned by a team that went, info()).
#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"
#include "common/rank_list.h"
#include "common/timing.h"
#include "mover/wait.h"

namespace deputy::agent {

namespace ch = channel;

SecretDigest secret_digest(const std::string &secret) {
    SecretDigest d{};
    crypto_generichash(d.data(), d.size(), reinterpret_cast<const unsigned char *>(secret.data()),
                       secret.size(), nullptr, 0);
    return d;
}

uint32_t TeamEngine::teams_of(uint32_t client) const {
    uint32_t n = 0;
    for (const auto &[id, t] : teams_)
        n += t->rank_of.count(client) != 0;
    for (const auto &[key, j] : joining_) n += j.client == client;
    return n;
}

uint32_t TeamEngine::joins_pending(uint32_t client) const {
    auto it = pending_.find(client);
    return it == pending_.end() ? 0 : it->second;
}

uint32_t TeamEngine::process_joins_pending(pid_t pid) const {
    uint32_t n = 0;
    for (const auto &[client, count] : pending_)
        if (const ClientSession *c = hooks_.find_client(client); c && c->creds.pid == pid)
            n += count;
    return n;
}

void TeamEngine::unpend(uint32_t client) {
    auto it = pending_.find(client);
    if (it != pending_.end() && --it->second == 0) pending_.erase(it);
}

TeamEngine::TeamEngine(mover::Device *device, const AgentConfig &config, Hooks hooks,
                       Internode *internode)
    : device_(device), config_(config), hooks_(std::move(hooks)),
      internode_(internode) {
    inline_left_ = config_.coll_inline_bytes;  // (progress() renews it each turn)
    // The first slot after the device's own: the table is empty at start.
    if (device_->add_address_space(&task_space_, &task_pasid_) != DP_OK)
        DP_LOG_ERROR("agent: no address space left for collective tasks");
    if (multi_node()) {
        node_credit_.assign(internode_->nodes(), config_.p2p_node_credit_bytes);
        node_owed_.assign(internode_->nodes(), 0);
        for (uint32_t slot = Internode::kP2pSlots; slot-- > 0;) free_slots_.push_back(slot);
    }
}

bool TeamEngine::run_inline(uint64_t traffic, bool all_in_place) {
    if (!all_in_place || traffic > config_.coll_inline_bytes || traffic > inline_left_)
        return false;
    inline_left_ -= traffic;
    return true;
}

size_t TeamEngine::window() const {
    // Enough to keep every engine busy with one operation while the service
    // thread is woken to refill it (with 2 per engine, a 16 MiB direct
    // allreduce on one engine took 1.15-1.4x the time: the engine waited for
    // the refill), few enough that another team's task waits for at most a
    // few chunks per engine.
    return std::max<size_t>(4, 4 * size_t(config_.device.total_engines()));
}

TeamEngine::~TeamEngine() = default;

void TeamEngine::join(ClientSession &s, const ch::control::TeamJoin &m) {
    auto answer = [&](dp_status_t status, std::string why) {
        if (status != DP_OK)
            DP_LOG_LIMITED(s.space().log(), "agent: team join from client {} (pid {}) refused: {}",
                           s.id, s.creds.pid, why);
        hooks_.send_ready(s, {m.join_id, status, 0, std::move(why)}, {});
    };
    if (m.size == 0 || m.size > DP_TEAM_MAX_SIZE)
        return answer(DP_ERR_INVALID, fmt::format("team '{}': size {} (1..{})", m.key, m.size,
                                                  DP_TEAM_MAX_SIZE));
    if (m.rank >= m.size)
        return answer(DP_ERR_INVALID,
                      fmt::format("team '{}': rank {} is not in 0..{}", m.key, m.rank, m.size - 1));
    // Before anything is looked up or kept: a flood of joins from one
    // client costs the agent this count and one answer each.
    if (const uint32_t pending = joins_pending(s.id); pending >= config_.max_pending_joins)
        return answer(DP_ERR_TOO_LARGE,
                      fmt::format("team '{}': this client has {} joins waiting for their teams "
                                  "already (max_pending_joins = {})",
                                  m.key, pending, config_.max_pending_joins));
    // A process's share of the forming-team slots, whatever number of
    // contexts (clients) it opened: its pid is held by the sessions'
    // pidfds, so it names one process for as long as these joins wait.
    if (const uint32_t pending = process_joins_pending(s.creds.pid);
        pending >= config_.max_process_pending_joins)
        return answer(DP_ERR_TOO_LARGE,
                      fmt::format("team '{}': process {} has {} joins waiting for their teams "
                                  "already (max_process_pending_joins = {})",
                                  m.key, s.creds.pid, pending, config_.max_process_pending_joins));
    if (m.timeout_ms > config_.max_team_timeout_ms)
        return answer(DP_ERR_INVALID,
                      fmt::format("team '{}': timeout {} ms is above the agent's "
                                  "max_team_timeout_ms = {}",
                                  m.key, m.timeout_ms, config_.max_team_timeout_ms));
    if (teams_of(s.id) >= config_.max_teams_per_client)
        return answer(DP_ERR_TOO_LARGE,
                      fmt::format("team '{}': this client is in {} teams already "
                                  "(max_teams_per_client = {})",
                                  m.key, teams_of(s.id), config_.max_teams_per_client));
    const SecretDigest secret = secret_digest(m.secret);
    if (multi_node()) return join_nodes(s, m, secret);
    // On one node every member is a client of this agent.
    if (m.size > config_.max_clients)
        return answer(DP_ERR_TOO_LARGE,
                      fmt::format("team '{}': size {}, more members than this agent serves "
                                  "(max_clients = {}; every member of a team on one node is "
                                  "one of its clients)",
                                  m.key, m.size, config_.max_clients));
    // Forming teams are named by the job's secret and the key together: a
    // key is a name another job may use too (every libdeputy-mpi job's
    // first communicator has the same one), and a join of another job
    // forms a team of its own rather than meet, or block, this one.
    const std::string scoped = node_key(secret, m.key);
    Team *t = nullptr;
    if (auto it = forming_.find(scoped); it != forming_.end()) {
        t = teams_.at(it->second).get();
    } else {
        if (forming_.size() >= config_.max_forming_teams)
            return answer(DP_ERR_TOO_LARGE,
                          fmt::format("team '{}': {} teams are forming already "
                                      "(max_forming_teams = {})",
                                      m.key, forming_.size(), config_.max_forming_teams));
        auto team = std::make_unique<Team>();
        team->id = next_team_id_++;
        team->key = m.key;
        team->secret = secret;
        team->size = m.size;
        team->timeout_ms = m.timeout_ms ? m.timeout_ms : std::min(uint32_t(kDefaultTeamTimeoutMs), config_.max_team_timeout_ms);
        team->deadline_ns = timing::now_ns() + uint64_t(team->timeout_ms) * 1'000'000;
        t = team.get();
        forming_[scoped] = team->id;
        teams_[team->id] = std::move(team);
    }
    if (t->size != m.size)
        return answer(DP_ERR_MISMATCH, fmt::format("team '{}' has size {}; this member says {}",
                                                   m.key, t->size, m.size));
    if (const Team::Here *h = t->here_of(m.rank); h && h->client != 0)
        return answer(DP_ERR_INVALID,
                      fmt::format("team '{}': rank {} joined already", m.key, m.rank));
    // A member's posts are its client's (find_member_team): two ranks in
    // one client could never both post. Its threads may now join at once,
    // so say so instead of forming a team that cannot run.
    if (auto at = t->rank_of.find(s.id); at != t->rank_of.end())
        return answer(DP_ERR_INVALID,
                      fmt::format("team '{}': this client joined it already as rank {} (one rank "
                                  "per client, i.e. per dp_context_t)",
                                  m.key, at->second));
    // A forming team holds the members that joined, in rank order: what a
    // flood of joins costs is bounded by the joins, whatever size they claim.
    if (!t->here_of(m.rank)) {
        const auto at = std::lower_bound(t->local_ranks.begin(), t->local_ranks.end(), m.rank);
        t->here.emplace(t->here.begin() + (at - t->local_ranks.begin()));
        t->local_ranks.insert(at, m.rank);
    }
    t->set_member(m.rank, s.id);
    t->here_of(m.rank)->join_id = m.join_id;
    t->agent_runs_all |= (m.flags & ch::control::kJoinAgentRuns) != 0;
    ++pending_[s.id];
    if (t->rank_of.size() < t->size) return;  // wait for the rest
    for (const Team::Here &h : t->here) unpend(h.client);
    forming_.erase(scoped);
    t->ready = true;  // every rank joined: local_ranks is 0..size-1
    ch::control::TeamReady ready{0, DP_OK, t->id, ""};
    std::vector<UniqueFd> views;
    offer_board(*t, &ready, &views);
    std::vector<int> fds;
    for (const UniqueFd &f : views) fds.push_back(f.get());
    DP_LOG_INFO("agent: team {} '{}' formed: {} member(s){}", t->id, t->key, t->size,
                t->board.valid() ? ", waiting members may run its operations" : "");
    for (const Team::Here &h : t->here) {
        ready.join_id = h.join_id;
        if (ClientSession *c = hooks_.find_client(h.client)) hooks_.send_ready(*c, ready, fds);
    }
}

void TeamEngine::form_timeouts() {
    if (forming_.empty()) return;
    const uint64_t now = timing::now_ns();
    for (auto it = forming_.begin(); it != forming_.end();) {
        Team &t = *teams_.at(it->second);
        if (now < t.deadline_ns) {
            ++it;
            continue;
        }
        std::vector<uint32_t> missing;
        for (uint32_t r = 0; r < t.size; ++r)
            if (!t.client_of(r)) missing.push_back(r);
        std::string why = fmt::format("team '{}': {} of {} members joined within {} ms; missing "
                                      "rank(s) {}",
                                      t.key, t.rank_of.size(), t.size, t.timeout_ms,
                                      rank_list(missing));
        DP_LOG_WARN("agent: {}", why);
        for (const Team::Here &h : t.here) {
            if (!h.client) continue;
            unpend(h.client);
            if (ClientSession *c = hooks_.find_client(h.client))
                hooks_.send_ready(*c, {h.join_id, DP_ERR_TIMEOUT, 0, why}, {});
        }
        const uint32_t team_id = t.id;
        it = forming_.erase(it);
        teams_.erase(team_id);
    }
}

TeamEngine::Team *TeamEngine::find_member_team(const ClientSession &s, uint32_t team_id,
                                               uint32_t *rank) {
    auto it = teams_.find(team_id);
    if (it == teams_.end() || !it->second->ready) return nullptr;
    Team &t = *it->second;
    auto at = t.rank_of.find(s.id);
    if (at == t.rank_of.end()) return nullptr;
    *rank = at->second;
    return &t;
}

dp_status_t TeamEngine::leave(ClientSession &s, uint32_t team_id, std::string *reason) {
    uint32_t rank = 0;
    Team *t = find_member_team(s, team_id, &rank);
    if (!t) {
        *reason = fmt::format("not a member of team {}", team_id);
        return DP_ERR_INVALID;
    }
    // An operation still running keeps going: it holds the memory it uses.
    break_team(*t, fmt::format("rank {} left team '{}'", rank, t->key));
    t->set_member(rank, 0);
    p2p_member_gone(*t, rank, s.id);
    if (t->rank_of.empty()) {
        retire(*t);
        teams_.erase(team_id);
    }
    return DP_OK;
}

void TeamEngine::client_gone(ClientSession &s) {
    std::vector<uint32_t> emptied;
    for (auto &[id, team] : teams_) {
        Team &t = *team;
        auto at = t.rank_of.find(s.id);
        if (at == t.rank_of.end()) continue;
        const uint32_t rank = at->second;
        t.set_member(rank, 0);
        if (!t.ready) {  // still forming: the others keep waiting for a new rank `rank`
            if (t.rank_of.empty()) emptied.push_back(id);
            continue;
        }
        // An operation running over this client's buffers goes on: it holds
        // their memory (Execution::memories), so nothing waits here.
        break_team(t, fmt::format("rank {} (pid {}) of team '{}' left or died", rank, s.creds.pid,
                                  t.key));
        p2p_member_gone(t, rank, s.id);
        DP_LOG_WARN("agent: {}", t.broken_reason);
        if (t.rank_of.empty()) emptied.push_back(id);
    }
    for (uint32_t id : emptied) {
        if (!teams_.at(id)->ready)
            forming_.erase(node_key(teams_.at(id)->secret, teams_.at(id)->key));
        retire(*teams_.at(id));
        teams_.erase(id);
    }
    forget_joins(s.id);
    pending_.erase(s.id);  // its slots in forming teams were cleared above
}

bool TeamEngine::poll_orphans() {
    bool any = false;
    for (size_t i = 0; i < orphans_.size();) {
        Execution &ex = *orphans_[i];
        ex.poll();
        if (!ex.idle()) {
            ++i;
            continue;
        }
        orphans_[i] = std::move(orphans_.back());  // frees its records and releases the memory
        orphans_.pop_back();
        any = true;
    }
    return any;
}

bool TeamEngine::progress() {
    form_timeouts();
    if (!node_parked_.empty()) expire_parked();
    bool worked = poll_internode();
    if (!orphans_.empty()) worked |= poll_orphans();
    // A new turn: the engines' windows are refilled below (run_inline()).
    inline_left_ = config_.coll_inline_bytes;
    if (!transfers_.empty()) worked |= progress_p2p();
    if (p2p_deferred_now_) worked |= retry_deferred();
    if (teams_.empty()) return worked;
    auto serve = [&](Team &t) {
        if (t.running) {
            worked |= advance(t);
        } else if (t.board.valid() && t.ready && !t.broken && !members_running(t)) {
            // The members finished an operation they ran: the next may start.
            const uint64_t before = t.ops;
            try_start(t);
            worked |= t.ops != before;
        }
    };
    // In turn from the team after the one served first last time (serving a
    // team neither adds nor erases one, so the iterators hold).
    const auto first = teams_.upper_bound(first_served_);
    for (auto it = first; it != teams_.end(); ++it) serve(*it->second);
    for (auto it = teams_.begin(); it != first; ++it) serve(*it->second);
    first_served_ = first != teams_.end() ? first->first : teams_.begin()->first;
    return worked;
}

bool TeamEngine::in_flight() const {
    // The steps between nodes wake the service thread through the
    // Internode's event fd; only the engines' tasks need watching.
    for (const auto &[id, t] : teams_)
        if (t->running && !t->running->idle()) return true;
    for (const auto &x : transfers_)
        if (!x->tasks.idle()) return true;
    return false;
}

void TeamEngine::wait_for_progress(int64_t timeout_ns) {
    for (auto &[id, t] : teams_)
        if (t->running)
            if (dp_completion_t *record = t->running->pending()) {
                mover::wait_completion(record, DP_WAIT_BLOCK, timeout_ns);
                return;
            }
    for (auto &x : transfers_)
        if (dp_completion_t *record = x->tasks.pending()) {
            mover::wait_completion(record, DP_WAIT_BLOCK, timeout_ns);
            return;
        }
}

bool TeamEngine::busy() const {
    if (!forming_.empty() || !orphans_.empty() || !transfers_.empty() || !node_parked_.empty() ||
        p2p_deferred_now_)
        return true;
    // Members running an operation ring when they finish it; until then the
    // next one waits here, so look now and then too.
    for (const auto &[id, t] : teams_)
        if (!t->running && !t->broken && members_running(*t)) return true;
    return false;
}

void TeamEngine::info(nlohmann::json *out) const {
    nlohmann::json teams = nlohmann::json::array();
    for (const auto &[id, t] : teams_) {
        // Posts of this node's members that wait for the others' (or for
        // the one running): the team's outstanding operations, per member.
        size_t queued = 0, stand_ins = 0;
        for (const Team::Here &h : t->here) {
            queued += h.queue.size();
            stand_ins += h.stand_in;
        }
        // The key is a label: joining also needs the job's secret, of which
        // nothing is shown.
        teams.push_back({{"id", id},
                         {"key", t->key},
                         {"size", t->size},
                         {"ready", t->ready},
                         {"broken", t->broken},
                         {"operations", t->ops},
                         {"local_ranks", t->local_ranks.size()},
                         {"members_here", t->rank_of.size()},  // joined, not left or gone
                         {"stand_ins", stand_ins},  // test mode (test_stand_in_key)
                         {"spans_nodes", t->spans_nodes},
                         {"queued_posts", queued},
                         {"running", t->running != nullptr},
                         {"board", t->board.valid()},
                         {"inter_node_steps", t->inter_algorithms}});
    }
    (*out)["teams"] = teams;
    if (internode_) (*out)["internode"] = internode_->describe();
    (*out)["collectives"] = {{"completed", completed_ops_},
                             {"failed", failed_ops_},
                             {"run_by_members", rank_ops_},
                             {"bytes", bytes_},
                             {"orphaned_running", orphans_.size()}};
    (*out)["p2p"] = {{"messages", p2p_messages_},
                     {"bytes", p2p_bytes_},
                     {"failed", p2p_failed_},
                     {"held_total", p2p_held_total_},
                     {"copied_by_receivers", p2p_member_copies_},
                     {"copied_bytes_by_receivers", p2p_member_copy_bytes_},
                     {"deferred_total", p2p_deferred_total_},
                     {"deferred_now", p2p_deferred_now_},
                     {"held_now", held_messages_},
                     {"held_bytes_now", held_bytes_},
                     {"moving", transfers_.size()}};
    if (multi_node())
        (*out)["p2p"]["between_nodes"] = {{"eager_sent", node_eager_sent_},
                                          {"ready_sent", node_ready_sent_},
                                          {"data_received", node_received_},
                                          {"sent_from_member", node_sent_mapped_},
                                          {"received_into_member", node_received_mapped_},
                                          {"sends_waiting", node_sends_.size()},
                                          {"sends_moving", node_sending_.size()},
                                          {"receives_moving", node_receives_.size()},
                                          {"receives_waiting_room", node_waiting_.size()},
                                          {"staged_bytes_now", staged_bytes_},
                                          {"heads_queued", outbox_.size()}};
}

}  // namespace deputy::agent
