#include "agent/agent.h"

#include <fmt/format.h>
#include <immintrin.h>
#include <sched.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "agent/bounce_space.h"
#include "agent/process_memory.h"
#include "agent/socket_dir.h"
#include "channel/coll_desc.h"
#include "channel/message.h"
#include "common/check.h"
#include "common/log.h"
#include "common/timing.h"
#include "mover/execute.h"
#include "mover/queue_group.h"
#include "mover/wait.h"
#include <deputy/version.h>

namespace deputy::agent {
namespace {

namespace control = channel::control;
using channel::MsgType;

// epoll tags: kind in the high half, client id in the low half.
enum Tag : uint64_t {
    kListen = 1,
    kStop = 2,
    kClientSocket = 3,
    kClientDoorbell = 4,
    kInternode = 5
};
uint64_t tag(Tag kind, uint32_t id = 0) { return (uint64_t(kind) << 32) | id; }

// Descriptors taken from one client per turn, so one busy client cannot
// starve the others.
constexpr int kDescriptorsPerTurn = 32;
// How long dropping a client may wait for its descriptors already with the
// engines (a DRAIN); only a stuck engine could take longer.
constexpr int64_t kDrainTimeoutNs = 10'000'000'000;

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }
bool power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

dp_status_t epoll_add(int ep, int fd, uint64_t data) {
    epoll_event ev{};
    ev.events = EPOLLIN;
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
        control::send_message(s.socket.get(), MsgType::kTeamReady, out, nullptr, 0,
                              int64_t(self->config_.request_timeout_ms) * 1'000'000, "agent team");
    };
    agent->teams_ = std::make_unique<TeamEngine>(agent->device_.get(), agent->limits_,
                                                 agent->config_, std::move(hooks), internode);
    if (internode) DP_CHECK(epoll_add(agent->epoll_.get(), internode->event_fd(), tag(kInternode)));
    agent->started_ns_ = timing::now_ns();
    *out = std::move(agent);
    return DP_OK;
}

Agent::~Agent() {
    for (auto &[id, s] : clients_)
        if (s->header) s->header->agent_state.store(channel::kAgentStopping, std::memory_order_release);
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
        } else if (teams_->in_flight()) {
            // The engines are busy with a collective: sleep on its next
            // batch record (they wake us) rather than poll their cores away,
            // looking at rings and sockets at least every 100 us.
            teams_->wait_for_progress(100'000);
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
            bool pending = false;
            for (ClientSession *s : attached_) pending |= s->pending.has_value();
            // A full device queue frees up without a doorbell; a forming
            // team has a deadline.
            timeout = pending ? 1 : teams_->busy() ? 10 : -1;
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
                case kClientSocket: on_client_event(id); break;
                case kClientDoorbell: on_doorbell(id); break;
                case kInternode: teams_->poll_internode(); break;
            }
        }
    }
    DP_LOG_INFO("agent: stopping; {} client(s) attached", attached_.size());
    for (auto &[id, s] : clients_)
        if (s->header) s->header->agent_state.store(channel::kAgentStopping, std::memory_order_release);
    std::vector<uint32_t> ids;
    for (auto &[id, s] : clients_) ids.push_back(id);
    for (uint32_t id : ids) drop_client(id, "the agent is stopping", false);
    device_->stop_engines();
    listener_.reset();  // unlinks the socket file
    DP_LOG_INFO("agent: stopped");
    return DP_OK;
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

bool Agent::needs_direct(const ClientSession &s, const dp_desc_t &d) const {
    if (s.direct.empty() || d.opcode == DP_OP_DRAIN) return false;
    // A batch's members may point anywhere: run the whole batch here.
    if (d.opcode == DP_OP_BATCH) return true;
    // src2 is a pattern or a seed for some opcodes; a value that happens to
    // fall in a registered range only sends the descriptor the slower way.
    return s.touches_direct(d.src) || s.touches_direct(d.dst) || s.touches_direct(d.src2) ||
           ((d.flags & DP_FLAG_COMPLETION) && s.touches_direct(d.completion));
}

bool Agent::poll_rings() {
    bool worked = false;
    for (ClientSession *s : attached_) {
        for (int k = 0; k < kDescriptorsPerTurn; ++k) {
            dp_desc_t d;
            if (s->pending) d = *s->pending;
            else if (!s->ring.pop(&d)) break;
            worked = true;
            if (channel::is_coll_opcode(d.opcode)) {
                s->pending.reset();
                teams_->post(*s, d);
                continue;
            }
            if (needs_direct(*s, d)) {
                s->pending.reset();
                run_direct(*s, d);
                continue;
            }
            if (device_->submit(s->wq, d, s->pasid) == DP_ERR_RETRY) {
                s->pending = d;  // the device queue is full: keep it, try again later
                break;
            }
            s->pending.reset();
            ++s->counters.forwarded;
            ++counters_.forwarded;
        }
    }
    return worked;
}

void Agent::run_direct(ClientSession &s, const dp_desc_t &d) {
    ++s.counters.direct;
    ++counters_.direct;
    const pid_t pid = s.creds.pid;
    std::string io_error;
    BounceSpace space(
        s.pool.get(), [&s](uint64_t a, uint64_t l) { return s.direct_allows(a, l); },
        [pid, &io_error](uint64_t a, uint64_t l, bool, void *dst) {
            return read_process_memory(pid, a, dst, l, &io_error);
        },
        config_.max_direct_bytes);
    // The record: in the pool (written in place, waiters woken) or in a
    // registered range (written back, status byte last). Like the engines, a
    // descriptor whose record cannot be reached does not run.
    const bool wants_record = d.flags & DP_FLAG_COMPLETION;
    dp_completion_t *pool_record = nullptr;
    bool direct_record = false;
    if (wants_record && d.completion % 32 == 0) {
        pool_record = static_cast<dp_completion_t *>(
            s.pool->translate(d.completion, sizeof(dp_completion_t), mover::Access::write));
        direct_record = !pool_record && s.direct_allows(d.completion, sizeof(dp_completion_t));
    }
    if (wants_record && !pool_record && !direct_record) {
        DP_LOG_WARN("client {}: completion address 0x{:x} is misaligned or outside its pool and "
                    "registered memory; {} not executed",
                    s.id, d.completion, dp_opcode_name(dp_opcode_t(d.opcode)));
        ++s.counters.denied;
        ++counters_.denied;
        return;
    }
    dp_desc_t body = d;
    body.completion = 0;
    body.flags &= ~uint32_t(DP_FLAG_COMPLETION);
    mover::OpResult result = mover::execute(body, space, limits_);
    const bool wrote = mover::is_success(result.status) || result.status == DP_COMP_BATCH_FAILED;
    if (wrote) {
        for (const auto &b : space.bounces()) {
            if (!b->written || b->bytes.empty()) continue;
            if (!write_process_memory(pid, b->addr, b->bytes.data(), b->bytes.size(), &io_error)) {
                DP_LOG_WARN("client {}: direct write-back failed: {}", s.id, io_error);
                result.status = DP_COMP_ADDRESS_DENIED;
                break;
            }
        }
    }
    if (result.status == DP_COMP_ADDRESS_DENIED) {
        ++s.counters.denied;
        ++counters_.denied;
        DP_LOG_WARN("client {}: {} denied: {}{}", s.id, dp_opcode_name(dp_opcode_t(d.opcode)),
                    space.refusal(), io_error.empty() ? "" : " (" + io_error + ")");
    }
    if (pool_record) {
        mover::publish_completion(pool_record, result, d.user);
    } else if (direct_record) {
        dp_completion_t local{};
        mover::publish_completion(&local, result, d.user);
        // Everything but the status first, then the status byte: a client
        // polling the record never sees "done" before the rest is there.
        auto *bytes = reinterpret_cast<const uint8_t *>(&local);
        if (!write_process_memory(pid, d.completion + 1, bytes + 1, sizeof(local) - 1, &io_error) ||
            !write_process_memory(pid, d.completion, bytes, 1, &io_error))
            DP_LOG_WARN("client {}: completion record write failed: {}", s.id, io_error);
    }
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
            DP_LOG_WARN("agent: refused connection from pid {} uid {}: {}", creds.pid, creds.uid,
                        why);
            std::vector<uint8_t> payload;
            control::encode(control::Reply{status, why}, &payload);
            control::send_message(conn.get(), MsgType::kReply, payload, nullptr, 0, 100'000'000,
                                  "agent refusal");
        };
        if (creds.uid != geteuid()) {
            refuse(DP_ERR_DENIED, fmt::format("uid {} is not the agent's user (uid {})", creds.uid,
                                              geteuid()));
            continue;
        }
        if (clients_.size() >= config_.max_clients) {
            refuse(DP_ERR_TOO_LARGE,
                   fmt::format("too many clients (max_clients = {})", config_.max_clients));
            continue;
        }
        auto s = std::make_unique<ClientSession>();
        s->id = next_id_++;
        if (next_id_ == 0) next_id_ = 1;
        s->creds = creds;
        s->connected_ns = timing::now_ns();
        if (epoll_add(epoll_.get(), conn.get(), tag(kClientSocket, s->id)) != DP_OK) continue;
        s->socket = std::move(conn);
        DP_LOG_DEBUG("agent: connection {} from pid {} uid {}", s->id, creds.pid, creds.uid);
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

void Agent::on_client_event(uint32_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    ClientSession &s = *it->second;
    char peek;
    ssize_t n = ::recv(s.socket.get(), &peek, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
        drop_client(id, "closed its connection", false);
        return;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        drop_client(id, fmt::format("socket error: {}", std::strerror(errno)), false);
        return;
    }
    MsgType type;
    std::vector<uint8_t> payload;
    dp_status_t st = control::recv_message(
        s.socket.get(), control::kMaxControlMessage, &type, &payload, nullptr, 0, nullptr,
        int64_t(config_.request_timeout_ms) * 1'000'000, "agent control");
    if (st != DP_OK) {
        drop_client(id, fmt::format("unreadable message ({})", dp_status_name(st)), true);
        return;
    }
    ++s.counters.requests;
    if (s.state == ClientSession::State::kConnecting) {
        if (type != MsgType::kAttach) {
            reply(s, DP_ERR_INVALID,
                  fmt::format("expected ATTACH first, got {}", channel::msg_type_name(type)));
            drop_client(id, "spoke before attaching", true);
            return;
        }
        st = handle_attach(s, payload);
    } else {
        switch (type) {
            case MsgType::kRegister: st = handle_register(s, payload); break;
            case MsgType::kDeregister: st = handle_deregister(s, payload); break;
            case MsgType::kStaged: st = handle_staged(s, payload); break;
            case MsgType::kTeamJoin: st = handle_team_join(s, payload); break;
            case MsgType::kTeamLeave: st = handle_team_leave(s, payload); break;
            default:
                reply(s, DP_ERR_INVALID,
                      fmt::format("unexpected message {}", channel::msg_type_name(type)));
                st = DP_ERR_INVALID;
        }
    }
    // A request the agent could answer leaves the client attached; a broken
    // connection or a protocol violation ends it.
    if (st == DP_ERR_AGENT_LOST || st == DP_ERR_IO || st == DP_ERR_INVALID)
        drop_client(id, fmt::format("request failed ({})", dp_status_name(st)), true);
}

dp_status_t Agent::reply(ClientSession &s, dp_status_t status, const std::string &reason) {
    std::vector<uint8_t> payload;
    control::encode(control::Reply{status, reason}, &payload);
    return control::send_message(s.socket.get(), MsgType::kReply, payload, nullptr, 0,
                                 int64_t(config_.request_timeout_ms) * 1'000'000, "agent reply");
}

dp_status_t Agent::handle_attach(ClientSession &s, const std::vector<uint8_t> &payload) {
    control::Attach m;
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    auto refuse = [&](dp_status_t status, const std::string &why) {
        ++counters_.refused;
        DP_LOG_WARN("agent: refused client pid {}: {}", s.creds.pid, why);
        reply(s, status, why);
        return DP_ERR_INVALID;  // ends the connection
    };
    if (st != DP_OK) return refuse(st, error);
    if (m.version != channel::kProtocolVersion)
        return refuse(DP_ERR_MISMATCH, fmt::format("protocol version {} (the agent speaks {})",
                                                   m.version, channel::kProtocolVersion));
    if (!config_.token.empty()) {
        const bool ok = m.token.size() == config_.token.size() &&
                        sodium_memcmp(m.token.data(), config_.token.data(), m.token.size()) == 0;
        if (!ok)
            return refuse(DP_ERR_DENIED, m.token.empty() ? "this agent requires a token (none given)"
                                                         : "wrong token");
    }
    if (m.purpose == control::Purpose::kInfo) {
        ++counters_.info_requests;
        std::string text = info_json();
        std::vector<uint8_t> out(text.begin(), text.end());
        control::send_message(s.socket.get(), MsgType::kInfoReply, out, nullptr, 0,
                              int64_t(config_.request_timeout_ms) * 1'000'000, "agent info");
        drop_client(s.id, "info served", false);
        return DP_OK;
    }
    if (m.purpose == control::Purpose::kService) {
        if (!service_handler_) return refuse(DP_ERR_UNSUPPORTED, "this agent runs no services");
        ++counters_.services;
        reply(s, DP_OK, "");
        // The socket leaves the agent's care: take it out of epoll, hand it over.
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.socket.get(), nullptr);
        UniqueFd socket = std::move(s.socket);
        const channel::sock::PeerCredentials peer = s.creds;
        clients_.erase(s.id);
        service_handler_(std::move(socket), peer);
        return DP_OK;
    }
    const uint32_t ring_size = m.ring_size ? m.ring_size : config_.ring_size;
    if (!power_of_two(ring_size) || ring_size > config_.max_ring_size)
        return refuse(DP_ERR_INVALID, fmt::format("ring_size {} must be a power of two <= {}",
                                                  ring_size, config_.max_ring_size));
    const uint64_t pool_bytes = round_up(m.pool_bytes ? m.pool_bytes : config_.pool_bytes, 4096);
    if (pool_bytes > config_.max_pool_bytes)
        return refuse(DP_ERR_TOO_LARGE, fmt::format("pool_bytes {} is above max_pool_bytes {}",
                                                    pool_bytes, config_.max_pool_bytes));
    s.ring_size = ring_size;
    s.ring_offset = channel::kClientHeaderBytes;
    s.pool_offset = round_up(s.ring_offset + mover::WorkQueue::bytes_for(ring_size), 4096);
    s.pool_bytes = pool_bytes;
    // Lazily: the client faults in what it allocates; the service thread
    // must not spend a second populating a large pool.
    st = Segment::create(fmt::format("deputy-client-{}", s.id), s.pool_offset + pool_bytes,
                         &s.segment, Segment::Pages::lazy);
    if (st != DP_OK) return refuse(st, fmt::format("cannot allocate a {}-byte segment",
                                                   s.pool_offset + pool_bytes));
    s.header = new (s.segment.data()) channel::ClientSegmentHeader{};
    s.header->magic = channel::kClientSegmentMagic;
    s.header->version = channel::kProtocolVersion;
    s.header->client_id = s.id;
    s.header->agent_sleeping.store(sleeping_ ? 1 : 0, std::memory_order_relaxed);
    s.header->agent_state.store(channel::kAgentServing, std::memory_order_relaxed);
    mover::WorkQueue::format(s.segment.at(s.ring_offset), ring_size);
    s.ring = ClientRing(s.segment.at(s.ring_offset), ring_size);
    s.pool = std::make_unique<PoolSpace>(s.segment.at(s.pool_offset), pool_bytes);
    s.doorbell.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!s.doorbell) return refuse(DP_ERR_IO, "eventfd failed in the agent");
    if (device_->add_address_space(s.pool.get(), &s.pasid) != DP_OK)
        return refuse(DP_ERR_NOMEM, "the device's address-space table is full");
    s.has_pasid = true;
    s.wq = s.id % device_->num_wqs();
    control::Attached a;
    a.client_id = s.id;
    a.num_engines = config_.device.total_engines();
    a.agent_pid = uint64_t(getpid());
    a.segment_bytes = s.segment.size();
    a.ring_offset = s.ring_offset;
    a.ring_size = ring_size;
    a.pool_offset = s.pool_offset;
    a.pool_bytes = pool_bytes;
    a.max_transfer = limits_.max_transfer_size;
    a.max_staged = config_.max_staged_bytes;
    std::vector<uint8_t> out;
    control::encode(a, &out);
    int fds[2] = {s.segment.fd(), s.doorbell.get()};
    DP_CHECK(control::send_message(s.socket.get(), MsgType::kAttached, out, fds, 2,
                                   int64_t(config_.request_timeout_ms) * 1'000'000, "agent attach"));
    DP_CHECK(epoll_add(epoll_.get(), s.doorbell.get(), tag(kClientDoorbell, s.id)));
    s.state = ClientSession::State::kAttached;
    ++counters_.attached;
    rebuild_attached();
    DP_LOG_INFO("agent: client {} attached: pid {} uid {}, ring {} descriptors, pool {} KiB", s.id,
                s.creds.pid, s.creds.uid, ring_size, pool_bytes >> 10);
    return DP_OK;
}

dp_status_t Agent::handle_register(ClientSession &s, const std::vector<uint8_t> &payload) {
    control::Register m;
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    if (st != DP_OK) {
        reply(s, st, error);
        return DP_OK;  // a bad request, answered; the connection is fine
    }
    if (m.kind == control::RegionKind::kSegmentBase) {
        if (m.len != s.segment.size())
            return reply(s, DP_ERR_INVALID,
                         fmt::format("segment base: len {} is not the segment's {} bytes", m.len,
                                     s.segment.size()));
        s.pool->set_client_pool(m.addr + s.pool_offset);
        return reply(s, DP_OK, "");
    }
    if (s.direct.size() >= config_.max_registrations)
        return reply(s, DP_ERR_TOO_LARGE,
                     fmt::format("too many registered ranges (max_registrations = {})",
                                 config_.max_registrations));
    // Prove now that cross-memory attach works on this range, so the client
    // learns at registration (not at its first descriptor) that it must use
    // staged mode.
    uint8_t probe;
    std::string io_error;
    if (!read_process_memory(s.creds.pid, m.addr, &probe, 1, &io_error) ||
        !read_process_memory(s.creds.pid, m.addr + m.len - 1, &probe, 1, &io_error)) {
        const bool refused = io_error.find("Operation not permitted") != std::string::npos;
        return reply(s, refused ? DP_ERR_UNSUPPORTED : DP_ERR_DENIED,
                     refused ? "the kernel refuses cross-memory attach to this process (" +
                                   io_error + "); use staged memory mode"
                             : "range not readable in the client: " + io_error);
    }
    s.direct.push_back({m.addr, m.len});
    DP_LOG_DEBUG("client {}: registered [0x{:x}, +{})", s.id, m.addr, m.len);
    return reply(s, DP_OK, "");
}

dp_status_t Agent::handle_deregister(ClientSession &s, const std::vector<uint8_t> &payload) {
    uint64_t addr = 0;
    std::string error;
    dp_status_t st = control::decode_deregister(payload.data(), payload.size(), &addr, &error);
    if (st != DP_OK) return reply(s, st, error);
    for (size_t i = 0; i < s.direct.size(); ++i) {
        if (s.direct[i].addr == addr) {
            // Direct descriptors run on this thread, so none is using the range now.
            s.direct.erase(s.direct.begin() + long(i));
            return reply(s, DP_OK, "");
        }
    }
    return reply(s, DP_ERR_INVALID, fmt::format("no registered range starts at 0x{:x}", addr));
}

dp_status_t Agent::handle_staged(ClientSession &s, const std::vector<uint8_t> &payload) {
    ++s.counters.staged;
    ++counters_.staged;
    control::Staged m;
    std::string error;
    control::StagedResult out;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    for (const control::StagedRange &r : m.sources)
        if (st == DP_OK && r.bytes.size() > config_.max_staged_bytes) {
            st = DP_ERR_TOO_LARGE;
            error = fmt::format("STAGED: a {}-byte range is above max_staged_bytes {}",
                                r.bytes.size(), config_.max_staged_bytes);
        }
    if (st != DP_OK) {
        out.status = st;
        DP_LOG_WARN("client {}: {}", s.id, error);
    } else {
        dp_desc_t body = m.desc;
        body.completion = 0;
        body.flags &= ~uint32_t(DP_FLAG_COMPLETION);
        // The client's bytes came with the message: look ranges up there.
        // A destination the client did not send starts zeroed; it is only
        // returned when the descriptor succeeded (then fully written).
        BounceSpace space(
            nullptr, [](uint64_t, uint64_t) { return true; },
            [&m](uint64_t a, uint64_t l, bool for_write, void *dst) {
                for (const control::StagedRange &r : m.sources) {
                    if (a >= r.addr && a - r.addr <= r.bytes.size() &&
                        l <= r.bytes.size() - (a - r.addr)) {
                        std::memcpy(dst, r.bytes.data() + (a - r.addr), l);
                        return true;
                    }
                }
                if (!for_write) return false;
                std::memset(dst, 0, l);
                return true;
            },
            config_.max_staged_bytes * control::kMaxStagedRanges);
        mover::OpResult result;
        if (body.opcode == DP_OP_DRAIN) {
            // Staged descriptors run one at a time: everything before is done.
            result.status = (body.flags || body.src || body.dst || body.src2 || body.size)
                                ? DP_COMP_INVALID_FIELD
                                : DP_COMP_SUCCESS;
        } else {
            result = mover::execute(body, space, limits_);
        }
        mover::publish_completion(&out.record, result, m.desc.user);
        out.record.waiter = 0;
        if (mover::is_success(result.status))
            for (const auto &b : space.bounces())
                if (b->written) out.writes.push_back({b->addr, b->bytes});
        if (result.status == DP_COMP_ADDRESS_DENIED) {
            ++s.counters.denied;
            ++counters_.denied;
        }
    }
    std::vector<uint8_t> bytes;
    control::encode(out, &bytes);
    return control::send_message(s.socket.get(), MsgType::kStagedResult, bytes, nullptr, 0,
                                 int64_t(config_.request_timeout_ms) * 1'000'000, "agent staged");
}

dp_status_t Agent::handle_team_join(ClientSession &s, const std::vector<uint8_t> &payload) {
    control::TeamJoin m;
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    if (st != DP_OK) {
        std::vector<uint8_t> out;
        control::encode(control::TeamReady{st, 0, error}, &out);
        return control::send_message(s.socket.get(), MsgType::kTeamReady, out, nullptr, 0,
                                     int64_t(config_.request_timeout_ms) * 1'000'000, "agent team");
    }
    teams_->join(s, m);  // answered now (refusal) or when the team is complete
    return DP_OK;
}

dp_status_t Agent::handle_team_leave(ClientSession &s, const std::vector<uint8_t> &payload) {
    uint32_t team_id = 0;
    std::string error;
    dp_status_t st = control::decode_team_leave(payload.data(), payload.size(), &team_id, &error);
    if (st == DP_OK) st = teams_->leave(s, team_id, &error);
    return reply(s, st, st == DP_OK ? "" : error);
}

void Agent::drain_queue(uint32_t wq) {
    dp_completion_t record{};
    dp_desc_t drain{};
    drain.opcode = DP_OP_DRAIN;
    drain.flags = DP_FLAG_COMPLETION;
    drain.completion = reinterpret_cast<uint64_t>(&record);
    const uint64_t start = timing::now_ns();
    while (device_->submit(wq, drain) == DP_ERR_RETRY) {
        if (timing::now_ns() - start > uint64_t(kDrainTimeoutNs)) {
            DP_LOG_ERROR("agent: queue {} stayed full for 10 s while draining a client", wq);
            return;
        }
        sched_yield();
    }
    if (mover::wait_completion(&record, DP_WAIT_YIELD, kDrainTimeoutNs) != DP_OK)
        DP_LOG_ERROR("agent: a DRAIN on queue {} did not finish in 10 s", wq);
}

void Agent::drop_client(uint32_t id, const std::string &why, bool error) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    ClientSession &s = *it->second;
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.socket.get(), nullptr);
    if (s.doorbell) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.doorbell.get(), nullptr);
    teams_->client_gone(s);
    if (s.has_pasid) {
        // Descriptors of this client may still be with the engines: wait
        // them out before its pool is unmapped and its PASID reused.
        if (s.counters.forwarded) drain_queue(s.wq);
        device_->remove_address_space(s.pasid);
    }
    const bool was_attached = s.state == ClientSession::State::kAttached;
    if (was_attached) {
        ++counters_.detached;
        if (error)
            DP_LOG_WARN("agent: client {} (pid {}) dropped: {}", id, s.creds.pid, why);
        else
            DP_LOG_INFO("agent: client {} (pid {}) detached: {}; {} descriptors, {} direct, {} "
                        "staged, {} denied",
                        id, s.creds.pid, why, s.counters.forwarded, s.counters.direct,
                        s.counters.staged, s.counters.denied);
    } else if (error) {
        DP_LOG_WARN("agent: connection {} (pid {}) closed: {}", id, s.creds.pid, why);
    }
    clients_.erase(it);  // unmaps the segment, closes socket and doorbell
    if (was_attached) rebuild_attached();
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
                   {"ring_size", config_.ring_size},
                   {"max_clients", config_.max_clients},
                   {"max_registrations", config_.max_registrations},
                   {"max_staged_bytes", config_.max_staged_bytes},
                   {"max_direct_bytes", config_.max_direct_bytes}};
    nlohmann::json clients = nlohmann::json::array();
    for (const ClientSession *s : attached_) {
        clients.push_back({{"id", s->id},
                           {"pid", s->creds.pid},
                           {"uid", s->creds.uid},
                           {"pool_bytes", s->pool_bytes},
                           {"ring_size", s->ring_size},
                           {"registered_ranges", s->direct.size()},
                           {"descriptors", s->counters.forwarded},
                           {"direct", s->counters.direct},
                           {"staged", s->counters.staged},
                           {"denied", s->counters.denied}});
    }
    j["clients"] = clients;
    teams_->info(&j);
    dp_mover_stats_t stats{};
    stats.size = sizeof(stats);
    device_->stats(&stats);
    j["counters"] = {{"connections", counters_.connections},
                     {"refused", counters_.refused},
                     {"attached", counters_.attached},
                     {"detached", counters_.detached},
                     {"info_requests", counters_.info_requests},
                     {"services", counters_.services},
                     {"descriptors_forwarded", counters_.forwarded},
                     {"descriptors_direct", counters_.direct},
                     {"descriptors_staged", counters_.staged},
                     {"denied", counters_.denied},
                     {"device_submitted", stats.submitted},
                     {"device_completed", stats.completed},
                     {"device_failed", stats.failed},
                     {"device_bytes", stats.bytes}};
    return j.dump();
}

}  // namespace deputy::agent
