// What clients ask the agent over their control connection: ATTACH (with
// authentication), REGISTER / DEREGISTER, HEAP_SHARE (the one message that
// carries an fd), STAGED (run by staged_execution.cc), TEAM_JOIN / TEAM_LEAVE. Every byte is decoded by channel/control.cc; every
// answer is queued on the non-blocking connection, never waited for.
#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <linux/magic.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>

#include <cstring>

#include "agent/agent.h"
#include "channel/message.h"
#include "common/check.h"
#include "common/log.h"
#include "common/stack_clear.h"
#include "common/timing.h"

namespace deputy::agent {

namespace control = channel::control;
using channel::MsgType;

namespace {

// What a remote client asking for direct or shared memory is told.
constexpr const char *kRemoteMemory =
    "a remote client's memory is out of the agent's reach: its requests travel staged, in "
    "the channel";


// Before ATTACH only ATTACH may come, and it is small: a connection that has
// not authenticated cannot make the agent buffer more than this.
constexpr size_t kMaxAttachMessage = 4096;
// Bytes read from one client per event, so that one flooding client cannot
// keep the service thread from the others.
constexpr size_t kReadBudget = 1 << 20;
// Answers a client may leave unread before it is dropped: room for a full
// STAGED_RESULT and a few small ones.
constexpr size_t kMaxQueuedAnswers = 2 * control::kMaxControlMessage;

size_t round_up(size_t x, size_t to) {
    return (x + to - 1) / to * to;
}
bool power_of_two(uint64_t x) {
    return x && !(x & (x - 1));
}

}  // namespace

void Agent::send(ClientSession &s, MsgType type, const std::vector<uint8_t> &payload,
                 const int *fds, size_t nfds) {
    if (!s.broken.empty()) return;
    const dp_status_t st = s.connection.send(type, payload, fds, nfds);
    if (st == DP_ERR_TOO_LARGE)
        s.broken = fmt::format("no file descriptor to pass it {} ({})", nfds,
                               fds_.why_full(FdBudget::count_open()));
    else if (st != DP_OK)
        s.broken = fmt::format("its connection broke ({})", dp_status_name(st));
    else if (s.connection.queued_bytes() > kMaxQueuedAnswers)
        s.broken = fmt::format("left {} bytes of answers unread", s.connection.queued_bytes());
    else
        update_epoll(s);
}

void Agent::update_epoll(ClientSession &s) {
    // A client whose requests wait behind its staged job is not read further.
    const bool read = !(s.awaiting() && !s.inbox.empty());
    const uint32_t want = uint32_t(EPOLLRDHUP) | (read ? uint32_t(EPOLLIN) : 0u) |
                          (s.connection.has_output() ? uint32_t(EPOLLOUT) : 0u);
    if (want == s.epoll_events) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = tag(kClientSocket, s.id);
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, s.connection.fd(), &ev) == 0) s.epoll_events = want;
}

dp_status_t Agent::reply(ClientSession &s, dp_status_t status, const std::string &reason) {
    std::vector<uint8_t> payload;
    control::encode(control::Reply{status, reason}, &payload);
    send(s, MsgType::kReply, payload);
    return DP_OK;
}

void Agent::on_client_event(uint32_t id, uint32_t events) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    ClientSession &s = *it->second;
    if (events & EPOLLOUT) {
        const dp_status_t st = s.connection.flush();
        if (st != DP_OK) return drop_client(id, "its connection broke while answering", false);
        update_epoll(s);
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        std::string error;
        const size_t max_payload = s.state == ClientSession::State::kConnecting
                                       ? kMaxAttachMessage
                                       : control::kMaxControlMessage;
        const dp_status_t st = s.connection.receive(max_payload, kReadBudget, &s.inbox, &error);
        if (st == DP_ERR_AGENT_LOST) return drop_client(id, "closed its connection", false);
        if (st != DP_OK) return drop_client(id, fmt::format("unreadable message: {}", error), true);
        if (!serve_inbox(s)) return;  // dropped
        update_epoll(s);
    }
    if (!s.broken.empty()) return drop_client(id, s.broken, true);
    if (s.closing && !s.connection.has_output()) drop_client(id, s.closing_reason, false);
}

bool Agent::serve_inbox(ClientSession &s) {
    const bool kept = serve_requests(s);
    // A join's secret passed through frames below this one (the decoder's,
    // the hash's, whatever else the join called): none of it stays there.
    if (std::exchange(secret_on_stack_, false)) clear_stack_below(128 << 10);
    return kept;
}

bool Agent::serve_requests(ClientSession &s) {
    const uint32_t id = s.id;
    while (!s.inbox.empty() && !s.closing && s.broken.empty() &&
           s.state != ClientSession::State::kPopulating && !s.awaiting()) {
        // A request from a session whose process is gone comes from whoever
        // inherited the socket: it is not the client's (client_process.h).
        if (!s.process->alive()) {
            drop_client(id, "its process exited", false);
            return false;
        }
        ControlConnection::Frame frame = std::move(s.inbox.front());
        s.inbox.pop_front();
        ++s.counters.requests;
        dp_status_t st = DP_OK;
        if (s.state == ClientSession::State::kConnecting) {
            if (frame.type != MsgType::kAttach) {
                reply(s, DP_ERR_INVALID,
                      fmt::format("expected ATTACH first, got {}",
                                  channel::msg_type_name(frame.type)));
                s.closing = true;
                s.closing_ns = timing::now_ns();
                s.closing_reason = "spoke before attaching";
                ++counters_.dropped;
                break;
            }
            st = handle_attach(s, frame.payload);
            if (!clients_.count(id)) return false;  // handed to a service
        } else if (frame.fd && frame.type != MsgType::kHeapShare) {
            reply(s, DP_ERR_INVALID,
                  fmt::format("a file descriptor attached to {} (only HEAP_SHARE carries one)",
                              channel::msg_type_name(frame.type)));
            st = DP_ERR_INVALID;
        } else {
            switch (frame.type) {
                case MsgType::kHeapShare:
                    st = handle_heap_share(s, frame.payload, std::move(frame.fd));
                    break;
                case MsgType::kRegister:
                    st = handle_register(s, frame.payload);
                    break;
                case MsgType::kDeregister:
                    st = handle_deregister(s, frame.payload);
                    break;
                case MsgType::kStaged:
                    st = handle_staged(s, frame.payload);
                    break;
                case MsgType::kTeamJoin:
                    st = handle_team_join(s, frame.payload);
                    // It held the job's secret: no copy outlives the join
                    // (control_connection.cc clears the bytes it read it
                    // through; the agent keeps only a digest).
                    sodium_memzero(frame.payload.data(), frame.payload.size());
                    break;
                case MsgType::kTeamLeave:
                    st = handle_team_leave(s, frame.payload);
                    break;
                default:
                    reply(s, DP_ERR_INVALID,
                          fmt::format("unexpected message {}", channel::msg_type_name(frame.type)));
                    st = DP_ERR_INVALID;
            }
        }
        // A request the agent could answer leaves the client attached; a
        // protocol violation ends it once the answer saying so is out.
        if (st != DP_OK && !s.closing) {
            s.closing = true;
            s.closing_ns = timing::now_ns();
            s.closing_reason = fmt::format("request failed ({})", dp_status_name(st));
        }
    }
    return true;
}

dp_status_t Agent::refuse_attach(ClientSession &s, dp_status_t status, const std::string &why) {
    ++counters_.refused;
    DP_LOG_LIMITED(connection_log_, "agent: refused client {}: {}", s.who(), why);
    reply(s, status, why);
    return DP_ERR_INVALID;  // ends the connection once the answer is out
}

dp_status_t Agent::handle_attach(ClientSession &s, const std::vector<uint8_t> &payload) {
    control::Attach m;
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    auto refuse = [&](dp_status_t status, const std::string &why) {
        return refuse_attach(s, status, why);
    };
    if (st != DP_OK) return refuse(st, error);
    if (m.version != channel::kProtocolVersion)
        return refuse(DP_ERR_MISMATCH, fmt::format("protocol version {} (the agent speaks {})",
                                                   m.version, channel::kProtocolVersion));
    if (!config_.token.empty()) {
        const bool ok = m.token.size() == config_.token.size() &&
                        sodium_memcmp(m.token.data(), config_.token.data(), m.token.size()) == 0;
        if (!ok)
            return refuse(DP_ERR_DENIED, m.token.empty()
                                             ? "this agent requires a token (none given)"
                                             : "wrong token");
    }
    if (m.purpose == control::Purpose::kInfo) {
        ++counters_.info_requests;
        std::string text = info_json();
        send(s, MsgType::kInfoReply, std::vector<uint8_t>(text.begin(), text.end()));
        s.closing = true;
        s.closing_ns = timing::now_ns();
        s.closing_reason = "info served";
        return DP_OK;
    }
    if (m.purpose == control::Purpose::kService || m.purpose == control::Purpose::kTeamProxy) {
        const bool service = m.purpose == control::Purpose::kService;
        if (service && !service_handler_)
            return refuse(DP_ERR_UNSUPPORTED, "this agent runs no services");
        if (service && s.remote)
            return refuse(DP_ERR_UNSUPPORTED, "services are for local processes");
        if (!service && !s.remote)
            return refuse(DP_ERR_UNSUPPORTED, "a team proxy stands in for a remote client only; "
                                              "a local one joins its teams itself");
        if (!service && !proxy_handler_)
            return refuse(DP_ERR_UNSUPPORTED, "this agent runs no team proxies");
        reply(s, DP_OK, "");
        if (s.connection.has_output() || !s.broken.empty())
            return DP_ERR_IO;  // would not take 20 bytes
        ++(service ? counters_.services : counters_.team_proxies);
        // The socket leaves the agent's care: take it out of epoll, hand it over.
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.connection.fd(), nullptr);
        if (!s.remote) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.process->pidfd(), nullptr);
        UniqueFd socket = s.connection.release();
        const channel::sock::PeerCredentials peer = s.creds;
        const std::string who = s.peer;
        --connecting_;
        clients_.erase(s.id);
        if (service) service_handler_(std::move(socket), peer);
        else proxy_handler_(std::move(socket), who);
        return DP_OK;
    }
    // The pid is the client's until proven otherwise (client_process.h):
    // where the kernel did not name the process, read the proof back, on a
    // thread (memory_probe.h); attach_proven() goes on when it is in.
    // A remote client proved who it is in the secure handshake (or the
    // operator chose plain TCP): there is no process here to read from.
    if (!s.process->verified() && !s.remote) {
        if (!probes_.start(s.id, s.creds.pid, s.process,
                           {{m.proof_addr, uint32_t(m.proof.size())}}, &error))
            return refuse(DP_ERR_RETRY, error + "; try again");
        s.awaiting_probe = true;
        s.probe_for = ClientSession::Probe::identity;
        s.attach_request = std::move(m);
        return DP_OK;
    }
    return attach_proven(s, m);
}

dp_status_t Agent::attach_proven(ClientSession &s, const control::Attach &m) {
    dp_status_t st = DP_OK;
    auto refuse = [&](dp_status_t status, const std::string &why) {
        return refuse_attach(s, status, why);
    };
    if (attached_.size() >= config_.max_clients)
        return refuse(DP_ERR_TOO_LARGE,
                      fmt::format("too many clients (max_clients = {})", config_.max_clients));
    // Remote clients' share: they have no process to count by.
    if (s.remote &&
        std::count_if(attached_.begin(), attached_.end(),
                      [](const ClientSession *c) { return c->remote; }) >=
            config_.max_remote_clients)
        return refuse(DP_ERR_TOO_LARGE, fmt::format("too many remote clients "
                                                    "(max_remote_clients = {})",
                                                    config_.max_remote_clients));
    // A process's share of the clients, whatever number of contexts it
    // opens (its pid names one process: the sessions hold its pidfd).
    const uint32_t of_process = s.remote ? 0 : uint32_t(std::count_if(
        attached_.begin(), attached_.end(),
        [&](const ClientSession *c) { return !c->remote && c->creds.pid == s.creds.pid; }));
    if (of_process >= config_.max_process_clients)
        return refuse(DP_ERR_TOO_LARGE,
                      fmt::format("process {} has {} clients attached already "
                                  "(max_process_clients = {})",
                                  s.creds.pid, of_process, config_.max_process_clients));
    if (uint64_t in_use = 0; !room_for_fds(FdBudget::kPerClient, &in_use))
        return refuse(DP_ERR_TOO_LARGE, fds_.why_full(in_use));
    const uint32_t ring_size = m.ring_size ? m.ring_size : config_.ring_size;
    if (!power_of_two(ring_size) || ring_size > config_.max_ring_size)
        return refuse(DP_ERR_INVALID, fmt::format("ring_size {} must be a power of two <= {}",
                                                  ring_size, config_.max_ring_size));
    // A remote client maps nothing of the agent's: its segment holds the
    // ring the service loop looks at, and a pool of one page nobody uses.
    const uint64_t pool_bytes =
        s.remote ? 4096 : round_up(m.pool_bytes ? m.pool_bytes : config_.pool_bytes, 4096);
    if (pool_bytes > config_.max_pool_bytes)
        return refuse(DP_ERR_TOO_LARGE, fmt::format("pool_bytes {} is above max_pool_bytes {}",
                                                    pool_bytes, config_.max_pool_bytes));
    if (pool_bytes > config_.max_total_pool_bytes - total_pool_bytes_)
        return refuse(DP_ERR_NOMEM,
                      fmt::format("a pool of {} bytes would take the agent's clients above "
                                  "max_total_pool_bytes {} ({} in use)",
                                  pool_bytes, config_.max_total_pool_bytes, total_pool_bytes_));
    s.ring_size = ring_size;
    s.ring_offset = channel::kClientHeaderBytes;
    s.pool_offset = round_up(s.ring_offset + mover::WorkQueue::bytes_for(ring_size), 4096);
    s.pool_bytes = pool_bytes;
    Segment segment;
    // Lazily: the service thread must not spend a second populating a large
    // pool. The populator faults it in (pool_prefault), or the client does
    // as it allocates. Open to one more writer: the client maps it, then
    // closes it (client/context.cc), before any teammate gets a view of it.
    st = Segment::create(fmt::format("deputy-client-{}", s.id), s.pool_offset + pool_bytes,
                         &segment, Segment::Pages::lazy, Segment::Writers::closable);
    if (st != DP_OK)
        return refuse(st,
                      fmt::format("cannot allocate a {}-byte segment", s.pool_offset + pool_bytes));
    s.memory = std::make_shared<ClientMemory>(std::move(segment), s.id, s.pool_offset, pool_bytes,
                                              s.process, config_.max_direct_bytes);
    total_pool_bytes_ += pool_bytes;  // given back in drop_client
    Segment &seg = s.memory->segment;
    s.header = new (seg.data()) channel::ClientSegmentHeader{};
    s.header->magic = channel::kClientSegmentMagic;
    s.header->version = channel::kProtocolVersion;
    s.header->client_id = s.id;
    s.header->agent_sleeping.store(sleeping_ ? 1 : 0, std::memory_order_relaxed);
    s.header->agent_state.store(channel::kAgentServing, std::memory_order_relaxed);
    mover::WorkQueue::format(seg.at(s.ring_offset), ring_size);
    s.ring = ClientRing(seg.at(s.ring_offset), ring_size);
    s.doorbell.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!s.doorbell) return refuse(DP_ERR_IO, "eventfd failed in the agent");
    if (device_->add_address_space(&s.memory->space, &s.pasid) != DP_OK)
        return refuse(DP_ERR_NOMEM, "the device's address-space table is full");
    s.has_pasid = true;
    s.wq = s.id % device_->num_wqs();
    if (config_.pool_prefault) {
        s.state = ClientSession::State::kPopulating;  // ATTACHED once the pool is in
        populator_->populate(s.id, s.memory);
    } else {
        finish_attach(s);
    }
    return DP_OK;
}

void Agent::on_populated() {
    for (uint32_t id : populator_->done()) {
        auto it = clients_.find(id);
        if (it == clients_.end() || it->second->state != ClientSession::State::kPopulating) continue;
        ClientSession &s = *it->second;
        finish_attach(s);
        // Requests it sent before its answer (it should not) are served now.
        if (!serve_inbox(s)) continue;
        if (!s.broken.empty()) drop_client(id, s.broken, true);
    }
}

void Agent::finish_attach(ClientSession &s) {
    Segment &seg = s.memory->segment;
    control::Attached a;
    a.client_id = s.id;
    a.num_engines = config_.device.total_engines();
    a.agent_pid = uint64_t(getpid());
    a.segment_bytes = seg.size();
    a.ring_offset = s.ring_offset;
    a.ring_size = s.ring_size;
    a.pool_offset = s.pool_offset;
    a.pool_bytes = s.pool_bytes;
    a.max_transfer = limits_.max_transfer_size;
    a.max_staged = config_.max_staged_bytes;
    std::vector<uint8_t> out;
    control::encode(a, &out);
    int fds[2] = {seg.fd(), s.doorbell.get()};
    // A remote client gets no descriptors: they would not cross the network.
    send(s, MsgType::kAttached, out, fds, s.remote ? 0 : 2);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kClientDoorbell, s.id);
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, s.doorbell.get(), &ev) != 0 && s.broken.empty())
        s.broken = "the agent could not watch its doorbell";
    s.header->agent_sleeping.store(sleeping_ ? 1 : 0, std::memory_order_relaxed);
    s.state = ClientSession::State::kAttached;
    --connecting_;
    ++counters_.attached;
    rebuild_attached();
    DP_LOG_INFO("agent: client {} attached: {} uid {} (identity {}), ring {} descriptors, "
                "pool {} KiB",
                s.id, s.who(), s.creds.uid,
                s.remote ? "secure session" : s.process->verified() ? "verified" : "unverified",
                s.ring_size, s.pool_bytes >> 10);
}

dp_status_t Agent::handle_register(ClientSession &s, const std::vector<uint8_t> &payload) {
    control::Register m;
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    if (st != DP_OK) return reply(s, st, error);  // a bad request, answered; the connection is fine
    ClientSpace &space = s.space();
    if (m.kind == control::RegionKind::kSegmentBase) {
        if (m.len != s.memory->segment.size())
            return reply(s, DP_ERR_INVALID,
                         fmt::format("segment base: len {} is not the segment's {} bytes", m.len,
                                     s.memory->segment.size()));
        space.set_client_pool(m.addr + s.pool_offset);
        return reply(s, DP_OK, "");
    }
    if (s.remote)
        return reply(s, DP_ERR_UNSUPPORTED, kRemoteMemory);
    if (!s.process->verified())
        return reply(s, DP_ERR_UNSUPPORTED,
                     "the agent could not verify this process's identity (cross-memory attach "
                     "refused); use mapped (dp_malloc) or staged memory");
    if (space.range_count() >= config_.max_registrations)
        return reply(s, DP_ERR_TOO_LARGE,
                     fmt::format("too many registered ranges (max_registrations = {})",
                                 config_.max_registrations));
    if (m.len == 0 || m.addr + m.len < m.addr)
        return reply(s, DP_ERR_INVALID,
                     fmt::format("range [0x{:x}, +{}) is empty or wraps", m.addr, m.len));
    // Prove now that cross-memory attach works on this range, so the client
    // learns at registration (not at its first descriptor) that it must use
    // staged mode. On a thread: the client's memory may make the read wait
    // as long as it likes (memory_probe.h). Answered in on_probed().
    if (!probes_.start(s.id, s.creds.pid, s.process, {{m.addr, 1}, {m.addr + m.len - 1, 1}},
                       &error))
        return reply(s, DP_ERR_RETRY, error + "; try again");
    s.awaiting_probe = true;
    s.probe_for = ClientSession::Probe::range;
    s.probe_addr = m.addr;
    s.probe_len = m.len;
    return DP_OK;
}

void Agent::finish_identity(ClientSession &s, const MemoryProbes::Result &r) {
    const uint32_t id = s.id;
    control::Attach m = std::move(*s.attach_request);
    s.attach_request.reset();
    std::string error;
    dp_status_t st = DP_OK;
    if (!r.ok) {
        // Cross-memory attach refused (Yama, a setuid process): attached
        // all the same, and direct memory is refused later.
        DP_LOG_DEBUG("agent: connection {}: cannot read the identity proof of pid {} ({}); direct "
                     "memory will be refused",
                     id, s.creds.pid, r.error);
        st = attach_proven(s, m);
    } else if (!s.process->check_proof(r.bytes.data(), m.proof, &error)) {
        st = refuse_attach(s, DP_ERR_DENIED, error);
    } else {
        st = attach_proven(s, m);
    }
    if (!clients_.count(id)) return;
    if (st != DP_OK && !s.closing) {
        s.closing = true;
        s.closing_ns = timing::now_ns();
        s.closing_reason = fmt::format("request failed ({})", dp_status_name(st));
    }
    if (s.state == ClientSession::State::kAttached && !serve_inbox(s)) return;
    if (!clients_.count(id)) return;
    update_epoll(s);
    if (!s.broken.empty()) return drop_client(id, s.broken, true);
    if (s.closing && !s.connection.has_output()) drop_client(id, s.closing_reason, false);
}

void Agent::on_probed() {
    for (MemoryProbes::Result &r : probes_.done()) {
        auto it = clients_.find(r.client);
        if (it == clients_.end() || !it->second->awaiting_probe) continue;  // it left meanwhile
        ClientSession &s = *it->second;
        s.awaiting_probe = false;
        if (s.probe_for == ClientSession::Probe::identity) {
            finish_identity(s, r);
            continue;
        }
        if (r.ok) {
            s.space().add_range(s.probe_addr, s.probe_len);
            DP_LOG_DEBUG("client {}: registered [0x{:x}, +{})", s.id, s.probe_addr, s.probe_len);
            reply(s, DP_OK, "");
        } else {
            const bool refused = r.error.find("Operation not permitted") != std::string::npos;
            reply(s, refused ? DP_ERR_UNSUPPORTED : DP_ERR_DENIED,
                  refused ? "the kernel refuses cross-memory attach to this process (" + r.error +
                                "); use staged memory mode"
                          : "range not readable in the client: " + r.error);
        }
        if (!serve_inbox(s)) continue;  // dropped
        update_epoll(s);
        if (!s.broken.empty()) drop_client(r.client, s.broken, true);
    }
}

dp_status_t Agent::handle_deregister(ClientSession &s, const std::vector<uint8_t> &payload) {
    uint64_t addr = 0;
    std::string error;
    dp_status_t st = control::decode_deregister(payload.data(), payload.size(), &addr, &error);
    if (st != DP_OK) return reply(s, st, error);
    // A descriptor still running on the range only reaches the client's own
    // memory, as it asked; new ones are refused from now on.
    if (s.space().remove_range(addr)) return reply(s, DP_OK, "");
    return reply(s, DP_ERR_INVALID, fmt::format("no registered range starts at 0x{:x}", addr));
}

dp_status_t Agent::handle_heap_share(ClientSession &s, const std::vector<uint8_t> &payload,
                                     UniqueFd fd) {
    control::HeapShare m;
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    if (st != DP_OK) return reply(s, st, error);
    if (s.remote) return reply(s, DP_ERR_UNSUPPORTED, kRemoteMemory);
    if (!fd) return reply(s, DP_ERR_INVALID, "HEAP_SHARE: no memfd attached");
    if (s.space().has_heap())
        return reply(s, DP_ERR_INVALID, "HEAP_SHARE: this client shared its heap already");
    if (m.len > config_.max_heap_bytes)
        return reply(s, DP_ERR_TOO_LARGE,
                     fmt::format("HEAP_SHARE: a heap of {} bytes is above max_heap_bytes {}",
                                 m.len, config_.max_heap_bytes));
    // Only shmem (a plain memfd): a hugetlbfs memfd can raise SIGBUS in
    // whoever faults a page the huge-page pool no longer has, and that would
    // be us; so would a file that can shrink under our loads (the seals).
    struct statfs fs {};
    if (fstatfs(fd.get(), &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        return reply(s, DP_ERR_DENIED, "HEAP_SHARE: the fd is not a memfd on shmem");
    if (st = Segment::check_received(fd.get(), m.len, &error); st != DP_OK)
        return reply(s, st, "HEAP_SHARE: " + error);
    Segment heap;
    if (st = Segment::map(std::move(fd), m.len, &heap, Segment::Pages::lazy); st != DP_OK)
        return reply(s, st, "HEAP_SHARE: the agent could not map the memfd");
    ClientMemory &memory = *s.memory;
    memory.heap = std::move(heap);
    memory.space.set_heap(m.addr, memory.heap.at(0), m.len);
    DP_LOG_DEBUG("client {}: shared heap [0x{:x}, +{})", s.id, m.addr, m.len);
    return reply(s, DP_OK, "");
}

dp_status_t Agent::handle_team_join(ClientSession &s, const std::vector<uint8_t> &payload) {
    control::TeamJoin m;
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    if (st != DP_OK) {
        sodium_memzero(m.secret.data(), m.secret.size());
        secret_on_stack_ = true;
        DP_LOG_LIMITED(s.space().log(), "client {}: team join refused: {}", s.id, error);
        std::vector<uint8_t> out;
        // Under the join id when it could be read (it comes first), so
        // that the thread which asked gets the refusal.
        control::encode(control::TeamReady{m.join_id, st, 0, error}, &out);
        send(s, MsgType::kTeamReady, out);
        return DP_OK;
    }
    if (s.remote) {
        sodium_memzero(m.secret.data(), m.secret.size());
        secret_on_stack_ = true;
        std::vector<uint8_t> out;
        control::encode(control::TeamReady{m.join_id, DP_ERR_UNSUPPORTED, 0,
                                           "teams are for local clients: collectives through a "
                                           "remote agent are not served yet"},
                        &out);
        send(s, MsgType::kTeamReady, out);
        return DP_OK;
    }
    teams_->join(s, m);  // answered now (refusal) or when the team is complete
    sodium_memzero(m.secret.data(), m.secret.size());
    secret_on_stack_ = true;
    return DP_OK;
}

dp_status_t Agent::handle_team_leave(ClientSession &s, const std::vector<uint8_t> &payload) {
    uint32_t team_id = 0;
    std::string error;
    dp_status_t st = control::decode_team_leave(payload.data(), payload.size(), &team_id, &error);
    if (st == DP_OK) {
        take_team_posts(s);
        st = teams_->leave(s, team_id, &error);
    }
    return reply(s, st, st == DP_OK ? "" : error);
}

}  // namespace deputy::agent
