// Clients coming and going: accepting connections (uid, max_connecting,
// identity), dropping a client (retiring its address space) and freeing its
// memory once no engine uses it. Separate from the loop and from requests.
#include <fmt/format.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_epoll.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::agent {

namespace control = channel::control;
using channel::MsgType;

bool Agent::refuse_without_fds() {
    if (!reserve_fd_) return false;
    reserve_fd_.reset();
    UniqueFd conn;
    const bool took = listener_->accept_fd(0, &conn) == DP_OK;
    if (took) {
        ++counters_.connections;
        ++counters_.refused;
        const std::string why = fds_.why_full(FdBudget::count_open());
        DP_LOG_LIMITED(fd_log_, "agent: refused a connection: {}", why);
        std::vector<uint8_t> payload;
        control::encode(control::Reply{DP_ERR_TOO_LARGE, why}, &payload);
        ControlConnection(std::move(conn)).send(MsgType::kReply, payload);
    }
    reserve_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    return took;
}

void Agent::set_listening(bool on) {
    if (on == listening_) return;
    listening_ = on;
    if (on) {
        if (epoll_add(epoll_.get(), listener_->fd(), tag(kListen)) != DP_OK) listening_ = false;
    } else {
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_->fd(), nullptr);
    }
}

void Agent::accept_clients() {
    for (;;) {
        UniqueFd conn;
        const dp_status_t accepted = listener_->accept_fd(0, &conn);
        if (accepted == DP_ERR_TOO_LARGE) {
            // Out of descriptors: take the connection with the one kept in
            // reserve and tell it why. Without a reserve, stop listening
            // until housekeeping looks again (10 ms): a queued connection
            // keeps the socket readable, and epoll would wake us for ever.
            if (refuse_without_fds()) continue;
            set_listening(false);
            DP_LOG_LIMITED(fd_log_, "agent: not accepting connections for now: {}",
                           fds_.why_full(FdBudget::count_open()));
            return;
        }
        if (accepted != DP_OK) return;
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

void Agent::admit_remote() {
    for (RemoteGate::Admitted &a : gate_->take()) {
        ++counters_.connections;
        if (connecting_ >= config_.max_connecting) {
            // The gate's handshakes are bounded already; past the local
            // bound too, the newest waits no longer than it takes to say so.
            ++counters_.refused;
            std::vector<uint8_t> payload;
            control::encode(control::Reply{DP_ERR_RETRY, "too many clients are attaching "
                                                         "(max_connecting); try again"},
                            &payload);
            ControlConnection(std::move(a.socket)).send(MsgType::kReply, payload);
            continue;
        }
        auto s = std::make_unique<ClientSession>();
        s->id = next_id_++;
        if (next_id_ == 0) next_id_ = 1;
        s->creds.uid = geteuid();
        s->process = ClientProcess::remote();
        s->remote = true;
        s->peer = std::move(a.peer);
        s->connected_ns = timing::now_ns();
        s->connection = ControlConnection(std::move(a.socket));
        s->epoll_events = EPOLLIN | EPOLLRDHUP;
        if (epoll_add(epoll_.get(), s->connection.fd(), tag(kClientSocket, s->id),
                      s->epoll_events) != DP_OK)
            continue;
        ++connecting_;
        DP_LOG_DEBUG("agent: connection {} from {}", s->id, s->who());
        clients_.emplace(s->id, std::move(s));
    }
}

void Agent::drop_client(uint32_t id, const std::string &why, bool misbehaved) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    ClientSession &s = *it->second;
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.connection.fd(), nullptr);
    if (s.doorbell) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.doorbell.get(), nullptr);
    if (s.process && !s.remote) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.process->pidfd(), nullptr);
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
        DP_LOG_WARN("agent: client {} ({}) dropped: {}", id, s.who(), why);
    else if (was_attached)
        DP_LOG_INFO("agent: client {} ({}) detached: {}; {} descriptors, {} staged, {} denied",
                    id, s.who(), why, s.counters.forwarded, s.counters.staged,
                    s.counters.denied);
    else if (misbehaved)
        DP_LOG_LIMITED(connection_log_, "agent: connection {} ({}) closed: {}", id, s.who(),
                       why);
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

}  // namespace deputy::agent
