// The agent's event loop and the lives of its clients: accepting them,
// polling their rings, sleeping, dropping them and freeing their memory once
// nothing uses it. What clients ask for is answered in client_control.cc.
#include "agent/agent.h"

#include <fmt/format.h>
#include <immintrin.h>
#include <malloc.h>
#include <sched.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "agent/socket_dir.h"
#include "channel/coll_post.h"
#include "common/check.h"
#include "common/log.h"
#include "common/scratch.h"
#include "common/timing.h"
#include "mover/queue_group.h"
#include <deputy/version.h>

namespace deputy::agent {

namespace control = channel::control;
using channel::MsgType;

namespace {

// Descriptors taken from one client per turn, so one busy client cannot
// starve the others.
constexpr int kDescriptorsPerTurn = 32;
// How often timeouts are looked at (and how late a drop for one may come).
constexpr uint64_t kHousekeepingNs = 10'000'000;

dp_status_t epoll_add(int ep, int fd, uint64_t data, uint32_t events = EPOLLIN) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        DP_FAIL(DP_ERR_IO, "agent: epoll_ctl(ADD, fd {}): {}", fd, std::strerror(errno));
    return DP_OK;
}

}  // namespace

dp_status_t Agent::create(AgentConfig config, std::unique_ptr<Agent> *out, std::string *error,
                          Internode *internode) {
    if (sodium_init() < 0) {
        *error = "agent: libsodium failed to initialise";
        return DP_ERR_INTERNAL;
    }
    DP_CHECK(finalize_config(&config, error));
    std::unique_ptr<Agent> agent(new Agent());
    agent->config_ = std::move(config);
    agent->address_ = agent->config_.socket_path;
    DP_CHECK(prepare_socket_dir(agent->address_, error));
    dp_status_t s = channel::uds::Listener::listen(agent->address_, &agent->listener_);
    if (s != DP_OK) {
        *error = fmt::format("agent: cannot listen on {} (is another agent running there?)",
                             agent->address_);
        return s;
    }
    s = mover::Device::create(agent->config_.device, &agent->device_, error);
    if (s != DP_OK) return s;
    const mover::WqConfig &wq0 = agent->config_.device.wqs.at(0);
    agent->limits_ = {wq0.max_transfer_size, wq0.max_batch_size, agent->device_->nt_threshold()};
    agent->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
    agent->stop_event_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!agent->epoll_ || !agent->stop_event_) {
        *error = fmt::format("agent: epoll/eventfd: {}", std::strerror(errno));
        return DP_ERR_IO;
    }
    DP_CHECK(epoll_add(agent->epoll_.get(), agent->listener_->fd(), tag(kListen)));
    DP_CHECK(epoll_add(agent->epoll_.get(), agent->stop_event_.get(), tag(kStop)));
    Agent *self = agent.get();
    TeamEngine::Hooks hooks;
    hooks.find_client = [self](uint32_t id) -> ClientSession * {
        auto it = self->clients_.find(id);
        return it == self->clients_.end() ? nullptr : it->second.get();
    };
    hooks.send_ready = [self](ClientSession &s, const control::TeamReady &m) {
        std::vector<uint8_t> out;
        control::encode(m, &out);
        self->send(s, MsgType::kTeamReady, out);
    };
    agent->teams_ = std::make_unique<TeamEngine>(agent->device_.get(), agent->config_,
                                                 std::move(hooks), internode);
    if (internode) DP_CHECK(epoll_add(agent->epoll_.get(), internode->event_fd(), tag(kInternode)));
    agent->populator_ = std::make_unique<PoolPopulator>();
    DP_CHECK(epoll_add(agent->epoll_.get(), agent->populator_->event_fd(), tag(kPopulated)));
    agent->started_ns_ = timing::now_ns();
    *out = std::move(agent);
    return DP_OK;
}

Agent::~Agent() {
    for (auto &[id, s] : clients_)
        if (s->header) s->header->agent_state.store(channel::kAgentStopping, std::memory_order_release);
    // Engines first: until they stopped, a retiring client's memory may be in use.
    if (device_) device_->stop_engines();
}

void Agent::stop() {
    stopping_.store(true, std::memory_order_relaxed);
    uint64_t one = 1;
    // write() is async-signal-safe; a full counter (impossible here) is harmless.
    [[maybe_unused]] ssize_t n = ::write(stop_event_.get(), &one, sizeof(one));
}

dp_status_t Agent::run() {
    DP_LOG_INFO("agent {} (pid {}) listening on {}: {} engine(s), {} queue(s), pool {} MiB per "
                "client, token {}",
                DEPUTY_VERSION_STRING, getpid(), address_, config_.device.total_engines(),
                device_->num_wqs(), config_.pool_bytes >> 20,
                config_.token.empty() ? "not required" : "required");
    const uint64_t idle_spin_ns = uint64_t(config_.idle_spin_us) * 1000;
    uint64_t idle_since = timing::now_ns();
    uint32_t turns = 0;
    epoll_event events[64];
    while (!stopping_.load(std::memory_order_relaxed)) {
        int timeout = 0;
        const bool rings = poll_rings();
        if (teams_->progress() || rings) {
            idle_since = timing::now_ns();
            if (++turns % 64) continue;  // look at the sockets now and then while busy
        } else if (timing::now_ns() - idle_since < idle_spin_ns) {
            if (config_.idle_yield)
                sched_yield();
            else
                _mm_pause();
            if (++turns % 64) continue;
        } else if (any_pending()) {
            // A client at its share of the engines, or a full device queue:
            // the engines free room soon. Give them the core meanwhile.
            sched_yield();
            if (++turns % 64) continue;
        } else if (teams_->in_flight()) {
            // The engines are busy with a collective: sleep on its next
            // batch record (they wake us) rather than poll their cores away,
            // looking at rings and sockets at least every 100 us.
            teams_->wait_for_progress(100'000);
        } else {
            // Sleep, but only after telling the clients to ring (then
            // looking once more: a descriptor pushed before they saw the
            // flag would otherwise wait for the next wake-up).
            scratch::trim();  // staged descriptors' bounce buffers
            set_sleeping(true);
            mover::doorbell_fence();
            if (any_ring_nonempty()) {
                set_sleeping(false);
                continue;
            }
            timeout = sleep_timeout_ms();
        }
        int n = epoll_wait(epoll_.get(), events, 64, timeout);
        if (timeout != 0) {
            set_sleeping(false);
            idle_since = timing::now_ns();
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            DP_FAIL(DP_ERR_IO, "agent: epoll_wait: {}", std::strerror(errno));
        }
        for (int i = 0; i < n; ++i) {
            const uint64_t data = events[i].data.u64;
            const uint32_t id = uint32_t(data);
            switch (Tag(data >> 32)) {
                case kListen: accept_clients(); break;
                case kStop: break;
                case kClientSocket: on_client_event(id, events[i].events); break;
                case kClientDoorbell: on_doorbell(id); break;
                case kClientProcess: drop_client(id, "its process exited", false); break;
                case kInternode: teams_->poll_internode(); break;
                case kPopulated: on_populated(); break;
            }
        }
        if (timing::now_ns() >= next_housekeeping_ns_) housekeeping();
    }
    DP_LOG_INFO("agent: stopping; {} client(s) attached", attached_.size());
    for (auto &[id, s] : clients_)
        if (s->header) s->header->agent_state.store(channel::kAgentStopping, std::memory_order_release);
    std::vector<uint32_t> ids;
    for (auto &[id, s] : clients_) ids.push_back(id);
    for (uint32_t id : ids) drop_client(id, "the agent is stopping", false);
    device_->stop_engines();  // now nothing runs: every retired space is idle
    reap_retired();
    listener_.reset();  // unlinks the socket file
    DP_LOG_INFO("agent: stopped");
    return DP_OK;
}

bool Agent::any_pending() const {
    for (const ClientSession *s : attached_)
        if (s->pending) return true;
    return false;
}

int Agent::sleep_timeout_ms() const {
    // A forming team, a client still attaching, a message half received,
    // an answer not yet taken and memory waiting for an engine all have
    // deadlines.
    if (!retiring_.empty() || teams_->busy() || connecting_ > 0) return 10;
    for (const auto &[id, s] : clients_)
        if (s->connection.has_output() || s->connection.partial_since_ns()) return 10;
    return 1000;  // rate-limited warnings report their counts
}

void Agent::housekeeping() {
    const uint64_t now = timing::now_ns();
    next_housekeeping_ns_ = now + kHousekeepingNs;
    const uint64_t attach_ns = uint64_t(config_.attach_timeout_ms) * 1'000'000;
    const uint64_t request_ns = uint64_t(config_.request_timeout_ms) * 1'000'000;
    struct Doomed {
        uint32_t id;
        std::string why;
        bool misbehaved;
    };
    std::vector<Doomed> doomed;
    for (auto &[id, s] : clients_) {
        const ControlConnection &c = s->connection;
        if (s->closing) {
            // Its last answer is out (or could not be delivered in time).
            if (!c.has_output()) doomed.push_back({id, s->closing_reason, false});
            else if (now - s->closing_ns > request_ns)
                doomed.push_back({id, s->closing_reason + "; its last answer was not taken", true});
        } else if (s->state == ClientSession::State::kConnecting &&  // (not while we populate)
                   now - s->connected_ns > attach_ns) {
            doomed.push_back({id, fmt::format("did not attach within attach_timeout_ms = {}",
                                              config_.attach_timeout_ms),
                              true});
        } else if (c.partial_since_ns() && now - c.partial_since_ns() > request_ns) {
            doomed.push_back({id, fmt::format("sent part of a message and not the rest within "
                                              "request_timeout_ms = {}",
                                              config_.request_timeout_ms),
                              true});
        } else if (c.blocked_since_ns() && now - c.blocked_since_ns() > request_ns) {
            doomed.push_back({id, fmt::format("did not take the agent's answer within "
                                              "request_timeout_ms = {}",
                                              config_.request_timeout_ms),
                              true});
        }
    }
    for (const Doomed &d : doomed) drop_client(d.id, d.why, d.misbehaved);
    reap_retired();
    connection_log_.flush_if_due();
    for (ClientSession *s : attached_) s->space().log().flush_if_due();
}

void Agent::rebuild_attached() {
    attached_.clear();
    for (auto &[id, s] : clients_)
        if (s->state == ClientSession::State::kAttached) attached_.push_back(s.get());
}

void Agent::set_sleeping(bool sleeping) {
    if (sleeping == sleeping_) return;
    sleeping_ = sleeping;
    for (ClientSession *s : attached_)
        s->header->agent_sleeping.store(sleeping ? 1 : 0, std::memory_order_relaxed);
}

bool Agent::any_ring_nonempty() const {
    for (const ClientSession *s : attached_)
        if (s->pending || s->ring.maybe_nonempty()) return true;
    return false;
}

bool Agent::poll_rings() {
    bool worked = false;
    for (ClientSession *s : attached_) {
        ClientSpace &space = s->space();
        for (int k = 0; k < kDescriptorsPerTurn; ++k) {
            dp_desc_t d;
            if (s->pending) d = *s->pending;
            else if (!s->ring.pop(&d)) break;
            if (channel::is_coll_post(d.opcode)) {
                s->pending.reset();
                channel::CollPost post;
                std::memcpy(&post, &d, sizeof(post));  // the slot's copy, decoded as a post
                teams_->post(*s, post);
                worked = true;
                continue;
            }
            // Every descriptor goes to the engines, under the client's own
            // address space, whatever memory it names (client_space.h), as
            // long as the client is within its share (may_submit).
            if (!space.may_submit()) {
                s->pending = d;
                break;
            }
            space.submitted(d);
            if (device_->submit(s->wq, d, s->pasid) == DP_ERR_RETRY) {
                space.finished(d);
                s->pending = d;  // the device queue is full: keep it, try again later
                break;
            }
            s->pending.reset();
            worked = true;
            ++s->counters.forwarded;
            ++counters_.forwarded;
        }
    }
    return worked;
}

void Agent::accept_clients() {
    for (;;) {
        UniqueFd conn;
        if (listener_->accept_fd(0, &conn) != DP_OK) return;
        ++counters_.connections;
        channel::sock::PeerCredentials creds;
        if (channel::sock::peer_credentials(conn.get(), &creds) != DP_OK) continue;
        auto refuse = [&](dp_status_t status, const std::string &why) {
            ++counters_.refused;
            DP_LOG_LIMITED(connection_log_, "agent: refused connection from pid {} uid {}: {}",
                           creds.pid, creds.uid, why);
            // One non-blocking try: a fresh socket takes a short answer, and
            // a peer that made it not do so gets nothing.
            std::vector<uint8_t> payload;
            control::encode(control::Reply{status, why}, &payload);
            ControlConnection(std::move(conn)).send(MsgType::kReply, payload);
        };
        if (creds.uid != geteuid()) {
            refuse(DP_ERR_DENIED, fmt::format("uid {} is not the agent's user (uid {})", creds.uid,
                                              geteuid()));
            continue;
        }
        if (connecting_ >= config_.max_connecting) {
            // Full of connections that have not attached: the oldest goes.
            // Anyone of our uid can open idle connections; a real client
            // sends ATTACH at once and is served before it would be next.
            uint32_t oldest = 0;
            uint64_t oldest_ns = UINT64_MAX;
            for (const auto &[id, c] : clients_)
                if (c->state == ClientSession::State::kConnecting && c->connected_ns < oldest_ns)
                    oldest = id, oldest_ns = c->connected_ns;
            // (All of them attaching, pools being populated: refuse the new one.)
            if (oldest == 0) {
                refuse(DP_ERR_RETRY, fmt::format("{} clients are attaching (max_connecting); try "
                                                 "again",
                                                 connecting_));
                continue;
            }
            drop_client(oldest, fmt::format("had not attached when max_connecting = {} newer "
                                            "connections were waiting",
                                            config_.max_connecting),
                        true);
        }
        auto process = std::make_shared<ClientProcess>();
        std::string error;
        if (ClientProcess::open(conn.get(), creds, process.get(), &error) != DP_OK) {
            refuse(DP_ERR_DENIED, error);
            continue;
        }
        auto s = std::make_unique<ClientSession>();
        s->id = next_id_++;
        if (next_id_ == 0) next_id_ = 1;
        s->creds = creds;
        s->process = std::move(process);
        s->connected_ns = timing::now_ns();
        s->connection = ControlConnection(std::move(conn));
        s->epoll_events = EPOLLIN | EPOLLRDHUP;
        if (epoll_add(epoll_.get(), s->connection.fd(), tag(kClientSocket, s->id),
                      s->epoll_events) != DP_OK ||
            epoll_add(epoll_.get(), s->process->pidfd(), tag(kClientProcess, s->id)) != DP_OK) {
            epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->connection.fd(), nullptr);
            continue;
        }
        ++connecting_;
        DP_LOG_DEBUG("agent: connection {} from pid {} uid {} (identity {})", s->id, creds.pid,
                     creds.uid, s->process->verified() ? "from the kernel" : "to be proven");
        clients_.emplace(s->id, std::move(s));
    }
}

void Agent::on_doorbell(uint32_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    uint64_t count;
    // Reset the eventfd; the rings are polled by the loop anyway.
    [[maybe_unused]] ssize_t n = ::read(it->second->doorbell.get(), &count, sizeof(count));
}

void Agent::drop_client(uint32_t id, const std::string &why, bool misbehaved) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    ClientSession &s = *it->second;
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.connection.fd(), nullptr);
    if (s.doorbell) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.doorbell.get(), nullptr);
    if (s.process) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.process->pidfd(), nullptr);
    teams_->client_gone(s);
    const bool was_attached = s.state == ClientSession::State::kAttached;
    // Work of this client may still be queued or running: the device drops
    // what is queued, and the memory stays until the engines are out of it
    // (reap_retired). Nothing here waits.
    if (s.has_pasid) {
        device_->retire_address_space(s.pasid);
        retiring_.push_back({s.pasid, s.memory});
    }
    if (s.memory) {
        s.space().log().flush();
        total_pool_bytes_ -= s.pool_bytes;
    }
    if (was_attached) {
        ++counters_.detached;
    } else {
        --connecting_;
    }
    if (misbehaved) ++counters_.dropped;
    if (was_attached && misbehaved)
        DP_LOG_WARN("agent: client {} (pid {}) dropped: {}", id, s.creds.pid, why);
    else if (was_attached)
        DP_LOG_INFO("agent: client {} (pid {}) detached: {}; {} descriptors, {} staged, {} denied",
                    id, s.creds.pid, why, s.counters.forwarded, s.counters.staged,
                    s.counters.denied);
    else if (misbehaved)
        DP_LOG_LIMITED(connection_log_, "agent: connection {} (pid {}) closed: {}", id,
                       s.creds.pid, why);
    clients_.erase(it);  // closes socket, doorbell and pidfd; the memory lives on while shared
    if (was_attached) rebuild_attached();
}

void Agent::reap_retired() {
    bool released = false;
    for (size_t i = 0; i < retiring_.size();) {
        if (!device_->address_space_idle(retiring_[i].pasid)) {
            ++i;
            continue;
        }
        device_->release_address_space(retiring_[i].pasid);
        retiring_[i] = std::move(retiring_.back());
        retiring_.pop_back();  // the last reference unmaps the segment (unless a collective holds it)
        released = true;
    }
    // What a client made this thread allocate (messages of MiBs in and out)
    // goes back to the system with it: glibc keeps freed memory otherwise,
    // and clients that come and go would grow the agent for good. (Bounce
    // buffers do not come from malloc: common/scratch.h.)
    if (released) malloc_trim(0);
}

std::string Agent::info_json() const {
    nlohmann::json j;
    j["version"] = DEPUTY_VERSION_STRING;
    j["pid"] = getpid();
    j["socket"] = address_;
    j["uptime_s"] = double(timing::now_ns() - started_ns_) / 1e9;
    j["engines"] = config_.device.total_engines();
    j["queues"] = device_->num_wqs();
    j["token_required"] = !config_.token.empty();
    j["limits"] = {{"pool_bytes", config_.pool_bytes},
                   {"max_pool_bytes", config_.max_pool_bytes},
                   {"max_total_pool_bytes", config_.max_total_pool_bytes},
                   {"ring_size", config_.ring_size},
                   {"max_clients", config_.max_clients},
                   {"max_connecting", config_.max_connecting},
                   {"max_registrations", config_.max_registrations},
                   {"max_teams_per_client", config_.max_teams_per_client},
                   {"max_staged_bytes", config_.max_staged_bytes},
                   {"max_direct_bytes", config_.max_direct_bytes}};
    nlohmann::json clients = nlohmann::json::array();
    uint64_t direct = 0;
    for (const ClientSession *s : attached_) {
        const uint64_t bounced = s->space().bounced();
        direct += bounced;
        clients.push_back({{"id", s->id},
                           {"pid", s->creds.pid},
                           {"uid", s->creds.uid},
                           {"identity", s->process->verified() ? "verified" : "unverified"},
                           {"pool_bytes", s->pool_bytes},
                           {"ring_size", s->ring_size},
                           {"registered_ranges", s->space().range_count()},
                           {"descriptors", s->counters.forwarded},
                           {"direct", bounced},
                           {"staged", s->counters.staged},
                           {"denied", s->counters.denied}});
    }
    j["clients"] = clients;
    teams_->info(&j);
    dp_mover_stats_t stats{};
    stats.size = sizeof(stats);
    device_->stats(&stats);
    j["counters"] = {{"connections", counters_.connections},
                     {"connecting", connecting_},
                     {"refused", counters_.refused},
                     {"attached", counters_.attached},
                     {"detached", counters_.detached},
                     {"dropped", counters_.dropped},
                     {"retiring", retiring_.size()},
                     {"info_requests", counters_.info_requests},
                     {"services", counters_.services},
                     {"descriptors_forwarded", counters_.forwarded},
                     {"descriptors_direct", direct},
                     {"descriptors_staged", counters_.staged},
                     {"denied", counters_.denied},
                     {"device_submitted", stats.submitted},
                     {"device_completed", stats.completed},
                     {"device_failed", stats.failed},
                     {"device_bytes", stats.bytes}};
    return j.dump();
}

}  // namespace deputy::agent
