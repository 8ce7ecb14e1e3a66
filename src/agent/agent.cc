// The agent's event loop: create and destroy, run (poll, spin, sleep in
// epoll_wait, dispatch events) and housekeeping (timeouts). What happens to
// clients, their rings and their requests lives in the files named in agent.h.
#include "agent/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/agent_epoll.h"
#include "agent/socket_dir.h"
#include "common/check.h"
#include "common/cpu_relax.h"
#include "common/log.h"
#include "common/timing.h"
#include "mover/queue_group.h"
#include <deputy/version.h>

namespace deputy::agent {

namespace control = channel::control;
using channel::MsgType;

namespace {

// How often timeouts are looked at (and how late a drop for one may come).
constexpr uint64_t kHousekeepingNs = 10'000'000;

}  // namespace

dp_status_t Agent::create(AgentConfig config, std::unique_ptr<Agent> *out, std::string *error,
                          Internode *internode) {
    if (sodium_init() < 0) {
        *error = "agent: libsodium failed to initialise";
        return DP_ERR_INTERNAL;
    }
    DP_CHECK(finalize_config(&config, error));
    // Before the first client's fd exists: from here on, the fds the agent
    // holds (every client's segment, every board) and its memory (job
    // secrets' digests, clients' bytes in flight) are root's to reach.
    if (!config.dumpable && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        *error = fmt::format("agent: prctl(PR_SET_DUMPABLE, 0): {}", std::strerror(errno));
        return DP_ERR_INTERNAL;
    }
    std::unique_ptr<Agent> agent(new Agent());
    agent->config_ = std::move(config);
    agent->address_ = agent->config_.socket_path;
    DP_CHECK(prepare_socket_dir(agent->address_, error));
    // Before the device and the populator start their threads: they inherit it.
    agent->pin_service_thread();
    std::string topology_error;
    if (load_machine_topology(&agent->topology_, &topology_error) != DP_OK)
        DP_LOG_WARN("agent: {}; `deputy info` shows no topology", topology_error);
    dp_status_t s = mover::Device::create(agent->config_.device, &agent->device_, error);
    if (s != DP_OK) return s;
    agent->device_->watch_held_engines(uint64_t(agent->config_.engine_hold_ms) * 1'000'000);
    const mover::WqConfig &wq0 = agent->config_.device.wqs.at(0);
    agent->limits_ = {wq0.max_transfer_size, wq0.max_batch_size, agent->device_->nt_threshold()};
    agent->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
    agent->stop_event_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!agent->epoll_ || !agent->stop_event_) {
        *error = fmt::format("agent: epoll/eventfd: {}", std::strerror(errno));
        return DP_ERR_IO;
    }
    DP_CHECK(epoll_add(agent->epoll_.get(), agent->stop_event_.get(), tag(kStop)));
    Agent *self = agent.get();
    TeamEngine::Hooks hooks;
    hooks.find_client = [self](uint32_t id) -> ClientSession * {
        auto it = self->clients_.find(id);
        return it == self->clients_.end() ? nullptr : it->second.get();
    };
    hooks.send_ready = [self](ClientSession &s, const control::TeamReady &m,
                              const std::vector<int> &fds) {
        std::vector<uint8_t> out;
        control::encode(m, &out);
        // A large team's board and views take more than one message's fds:
        // the rest follow at once in TEAM_VIEWS (nothing comes between).
        const size_t per = channel::sock::kMaxFdsPerMessage;
        self->send(s, MsgType::kTeamReady, out, fds.data(), std::min(fds.size(), per));
        for (size_t at = per; at < fds.size(); at += per) {
            out.clear();
            control::encode_team_views(m.join_id, &out);
            self->send(s, MsgType::kTeamViews, out, fds.data() + at,
                       std::min(fds.size() - at, per));
        }
    };
    hooks.room_for_fds = [self](uint64_t more, std::string *why) {
        uint64_t in_use = 0;
        if (self->room_for_fds(more, &in_use)) return true;
        *why = self->fds_.why_full(in_use);
        return false;
    };
    agent->teams_ = std::make_unique<TeamEngine>(agent->device_.get(), agent->config_,
                                                 std::move(hooks), internode);
    if (internode) DP_CHECK(epoll_add(agent->epoll_.get(), internode->event_fd(), tag(kInternode)));
    if (agent->device_->add_address_space(&agent->staged_space_, &agent->staged_pasid_) != DP_OK) {
        *error = "agent: no device address space left for staged descriptors";
        return DP_ERR_NOMEM;
    }
    agent->populator_ = std::make_unique<PoolPopulator>();
    DP_CHECK(epoll_add(agent->epoll_.get(), agent->populator_->event_fd(), tag(kPopulated)));
    DP_CHECK(epoll_add(agent->epoll_.get(), agent->probes_.event_fd(), tag(kProbed)));
    if (!agent->config_.listen.empty()) {
        RemoteGateConfig gate;
        gate.address = agent->config_.listen.substr(std::string("tcp://").size());
        gate.key_file = agent->config_.key_file;
        gate.insecure = agent->config_.insecure_tcp;
        gate.max_handshakes = agent->config_.max_handshakes;
        gate.handshake_timeout_ns = int64_t(agent->config_.handshake_timeout_ms) * 1'000'000;
        gate.silence_ns = int64_t(agent->config_.remote_timeout_ms) * 1'000'000;
        gate.max_message = control::kMaxControlMessage;
        s = RemoteGate::open(gate, &agent->gate_);
        if (s != DP_OK) {
            *error = fmt::format("agent: cannot serve remote clients at {}: {} (the log says why)",
                                 agent->config_.listen, dp_status_name(s));
            return s;
        }
        DP_CHECK(epoll_add(agent->epoll_.get(), agent->gate_->fd(), tag(kRemoteGate)));
        if (agent->gate_->secure())
            DP_LOG_INFO("agent: serving remote clients at {} (secure session, key {})",
                        agent->gate_->address(), agent->config_.key_file);
        else
            DP_LOG_WARN("agent: serving remote clients at {} IN CLEAR (--insecure-tcp): anyone "
                        "who reaches the port can use this agent and read what it moves",
                        agent->gate_->address());
    }
    // The socket file last: whoever waits for it to appear (deputy launch,
    // the tests, scripts) finds an agent whose every descriptor and thread
    // exists, so a count of its fds taken then is its idle count.
    s = channel::uds::Listener::listen(agent->address_, &agent->listener_);
    if (s != DP_OK) {
        *error = fmt::format("agent: cannot listen on {} (is another agent running there?)",
                             agent->address_);
        return s;
    }
    DP_CHECK(epoll_add(agent->epoll_.get(), agent->listener_->fd(), tag(kListen)));
    agent->reserve_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    // Last: what the agent holds of its own now is the budget's base.
    std::string fd_note;
    agent->fds_.init(&fd_note);
    if (!fd_note.empty()) DP_LOG_INFO("agent: {}", fd_note);
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
    pin_service_thread();  // run() may be called on another thread than create()
    DP_LOG_INFO("{}", placement_line());
    const uint64_t idle_spin_ns = uint64_t(config_.idle_spin_us) * 1000;
    uint64_t idle_since = timing::now_ns();
    uint32_t turns = 0;
    epoll_event events[64];
    while (!stopping_.load(std::memory_order_relaxed)) {
        int timeout = 0;
        const bool rings = poll_rings();
        const bool staged = serve_staged();
        if (teams_->progress() || rings || staged) {
            idle_since = timing::now_ns();
            if (++turns % 64) continue;  // look at the sockets now and then while busy
        } else if (timing::now_ns() - idle_since < idle_spin_ns) {
            if (config_.idle_yield)
                sched_yield();
            else
                cpu_relax();
            if (++turns % 64) continue;
        } else if (any_pending()) {
            // A client at its share of the engines, or a full device queue
            // (ring descriptors or staged jobs waiting): the engines free
            // room soon. Give them the core meanwhile.
            sched_yield();
            if (++turns % 64) continue;
        } else if (teams_->in_flight()) {
            // The engines are busy with a collective: sleep on its next
            // batch record (they wake us) rather than poll their cores away,
            // looking at rings and sockets at least every 100 us.
            teams_->wait_for_progress(100'000);
        } else if (wait_for_staged(100'000)) {
            // Likewise for a staged job: its record wakes us.
        } else {
            // Sleep, but only after telling the clients to ring (then
            // looking once more: a descriptor pushed before they saw the
            // flag would otherwise wait for the next wake-up).
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
                case kProbed: on_probed(); break;
                case kRemoteGate: admit_remote(); break;
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
    staged_jobs_.clear();
    listener_.reset();  // unlinks the socket file
    DP_LOG_INFO("agent: stopped");
    return DP_OK;
}

bool Agent::any_pending() const {
    const uint64_t now = timing::now_ns();
    for (const ClientSession *s : attached_)
        if (pending_soon(*s, now)) return true;
    for (const auto &job : staged_jobs_)
        if (!job->submitted) return true;
    return false;
}

uint64_t Agent::fds_bound() const {
    const uint64_t remote =
        gate_ ? FdBudget::kPerRemoteAtMost * gate_->live_relays() +
                    FdBudget::kPerHandshakeAtMost * gate_->max_handshakes()
              : 0;
    return fds_.at_start() + retiring_.size() +
           FdBudget::kPerClientAtMost * clients_.size() + teams_->boards() + remote;
}

int Agent::sleep_timeout_ms() const {
    // A forming team, a client still attaching, a message half received,
    // an answer not yet taken and memory waiting for an engine all have
    // deadlines.
    if (!staged_jobs_.empty()) return 1;  // (the loop waits on them before it sleeps)
    for (const ClientSession *s : attached_)
        if (s->pending) return 1;  // (held longer than pending_soon: looked at each ms)
    // An engine inside a call into a client's memory may be held there:
    // housekeeping relieves it (mover/stall_watch.h).
    if (device_->engines_in_calls()) return 10;
    if (!retiring_.empty() || teams_->busy() || connecting_ > 0 || !listening_) return 10;
    for (const auto &[id, s] : clients_)
        if (s->connection.has_output() || s->connection.partial_since_ns()) return 10;
    return 1000;  // rate-limited warnings report their counts
}

void Agent::housekeeping() {
    const uint64_t now = timing::now_ns();
    next_housekeeping_ns_ = now + kHousekeepingNs;
    if (!listening_) {
        if (!reserve_fd_) reserve_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
        set_listening(true);  // accept_clients() pauses it again if still out of fds
    }
    // An agent started on demand (exit_when_unused_ms) goes once nobody
    // has been attached for that long, its start counting as a use.
    if (!clients_.empty() || !unused_since_ns_) unused_since_ns_ = now;
    if (config_.exit_when_unused_ms &&
        now - unused_since_ns_ >= uint64_t(config_.exit_when_unused_ms) * 1'000'000) {
        DP_LOG_INFO("agent: no client for exit_when_unused_ms = {}: stopping",
                    config_.exit_when_unused_ms);
        stop();
    }
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
        } else if (c.partial_since_ns() && !s->awaiting() &&  // (not read meanwhile)
                   now - c.partial_since_ns() > request_ns) {
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
    device_->relieve_held_engines();
    reap_retired();
    connection_log_.flush_if_due();
    for (ClientSession *s : attached_) s->space().log().flush_if_due();
}

}  // namespace deputy::agent
