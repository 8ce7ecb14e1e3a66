#include "agent/remote_gate.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "channel/secure.h"
#include "common/check.h"
#include "common/sys_error.h"
#include "common/log.h"
#include "common/log_limiter.h"
#include "common/log_quiet.h"
#include "common/timing.h"

namespace deputy::agent {
namespace {

// How often the gate looks at handshakes and relays when nothing happens.
constexpr int kTickMs = 100;

LogLimiter &gate_log() {
    static LogLimiter limiter("agent: remote connections");
    return limiter;
}

void signal_fd(int fd) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
}

}  // namespace

// One connection shaking hands, on a thread of its own.
struct RemoteGate::Handshake {
    std::string peer;
    uint64_t started_ns = 0;
    // A second descriptor of the socket: shutting it down ends a handshake
    // blocked on the peer (eviction), whatever the thread did with the first.
    UniqueFd kill_switch;
    std::atomic<bool> done{false};
    std::thread thread;

    // Cutting and admitting exclude each other: a handshake that completed
    // is the relay's, and the gate never shuts its socket down.
    bool cut() {
        std::lock_guard<std::mutex> lock(mu);
        if (claimed) return false;
        was_cut = true;
        ::shutdown(kill_switch.get(), SHUT_RDWR);
        return true;
    }
    bool claim() {
        std::lock_guard<std::mutex> lock(mu);
        if (was_cut) return false;
        return claimed = true;
    }
    std::mutex mu;
    bool claimed = false, was_cut = false;
};

dp_status_t RemoteGate::open(const RemoteGateConfig &config, std::unique_ptr<RemoteGate> *out) {
    std::unique_ptr<RemoteGate> g(new RemoteGate());
    g->config_ = config;
    if (!config.insecure) {
        if (config.key_file.empty())
            DP_FAIL(DP_ERR_INVALID, "agent: --listen needs --key FILE (a key file as `deputy "
                                    "bench channel --keygen FILE` makes it), or --insecure-tcp");
        DP_CHECK(channel::secure::ensure_sodium());
        DP_CHECK(channel::secure::load_key_file(config.key_file, &g->key_));
    }
    DP_CHECK(channel::tcp::Listener::listen(config.address, &g->listener_));
    g->stop_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    g->ready_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!g->stop_ || !g->ready_) DP_FAIL_ERRNO(DP_ERR_IO, "agent: remote gate: eventfd");
    RemoteGate *self = g.get();
    g->thread_ = std::thread([self] { self->run(); });
    *out = std::move(g);
    return DP_OK;
}

RemoteGate::~RemoteGate() {
    if (stop_) signal_fd(stop_.get());
    if (thread_.joinable()) thread_.join();
    reap(true);
    std::lock_guard<std::mutex> lock(mu_);
    relays_.clear();  // each shuts its sides down and joins its threads
}

std::vector<RemoteGate::Admitted> RemoteGate::take() {
    uint64_t n;
    [[maybe_unused]] ssize_t r = ::read(ready_.get(), &n, sizeof(n));
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(admitted_, {});
}

RemoteGate::Counters RemoteGate::counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
}

size_t RemoteGate::live_relays() const {
    std::lock_guard<std::mutex> lock(mu_);
    return relays_.size();
}

void RemoteGate::run() {
    pollfd fds[2] = {{stop_.get(), POLLIN, 0}, {listener_->fd(), POLLIN, 0}};
    for (;;) {
        const int n = poll(fds, 2, kTickMs);
        if (n > 0 && (fds[0].revents & POLLIN)) return;
        reap(false);
        if (n <= 0 || !(fds[1].revents & POLLIN)) continue;
        UniqueFd conn;
        std::string peer;
        if (listener_->accept_fd(0, &conn, &peer) != DP_OK) {
            // Out of descriptors (or the like): the connection waits in the
            // backlog; look again after a tick rather than spin on it.
            poll(fds, 1, kTickMs);
            continue;
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            ++counters_.accepted;
        }
        start_handshake(std::move(conn), std::move(peer));
    }
}

void RemoteGate::start_handshake(UniqueFd conn, std::string peer) {
    if (handshakes_.size() >= config_.max_handshakes) {
        // The oldest connection still shaking hands goes: a real client
        // completes its handshake in a round trip or two.
        for (auto &h : handshakes_) {
            if (h->done.load(std::memory_order_acquire) || !h->cut()) continue;
            DP_LOG_LIMITED(gate_log(), "agent: remote connection from {} cut: {} newer "
                                       "connections were shaking hands (max_handshakes)",
                           h->peer, config_.max_handshakes);
            std::lock_guard<std::mutex> lock(mu_);
            ++counters_.evicted;
            break;
        }
    }
    auto h = std::make_unique<Handshake>();
    h->peer = peer;
    h->started_ns = timing::now_ns();
    h->kill_switch.reset(fcntl(conn.get(), F_DUPFD_CLOEXEC, 0));
    Handshake *raw = h.get();
    h->thread = std::thread([this, raw, conn = std::move(conn)]() mutable {
        // Any peer on the network can fail a handshake at will: what the
        // session's layers would log goes into the one rate-limited line
        // below instead of a line per attempt.
        std::optional<log::Quiet> quiet(std::in_place);
        channel::TransportOptions options;
        // The control protocol's messages, sealed.
        options.max_message = config_.max_message + channel::secure::kOverhead;
        std::unique_ptr<channel::Transport> transport;
        dp_status_t st = channel::tcp::bound_silence(conn.get(), config_.silence_ns);
        if (st == DP_OK) st = channel::tcp::wrap(std::move(conn), raw->peer, options, &transport);
        if (st == DP_OK && !config_.insecure) {
            std::unique_ptr<channel::Transport> secured;
            st = channel::secure::establish(std::move(transport), key_,
                                            channel::secure::Role::kResponder,
                                            config_.handshake_timeout_ns, &secured);
            transport = std::move(secured);
        }
        // (Cut meanwhile: a newer connection needed the slot.)
        if (st == DP_OK && !raw->claim()) st = DP_ERR_TIMEOUT;
        UniqueFd local;
        std::unique_ptr<channel::Relay> relay;
        if (st == DP_OK)
            st = channel::Relay::start(std::move(transport), config_.max_message, &local, &relay);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (st == DP_OK) {
                ++counters_.admitted;
                relays_.push_back(std::move(relay));
                admitted_.push_back({std::move(local), raw->peer});
            } else {
                ++counters_.failed;
            }
        }
        const std::string why = quiet->last();
        quiet.reset();
        if (st == DP_OK)
            signal_fd(ready_.get());
        else
            DP_LOG_LIMITED(gate_log(), "agent: remote connection from {} closed: {}{}{}",
                           raw->peer, dp_status_name(st), why.empty() ? "" : ": ", why);
        raw->done.store(true, std::memory_order_release);
    });
    handshakes_.push_back(std::move(h));
}

void RemoteGate::reap(bool all) {
    for (auto it = handshakes_.begin(); it != handshakes_.end();) {
        Handshake &h = **it;
        if (all && !h.done.load(std::memory_order_acquire)) h.cut();
        if (all || h.done.load(std::memory_order_acquire)) {
            h.thread.join();
            it = handshakes_.erase(it);
        } else {
            ++it;
        }
    }
    std::list<std::unique_ptr<channel::Relay>> ended;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = relays_.begin(); it != relays_.end();)
            if ((*it)->finished()) ended.splice(ended.end(), relays_, it++);
            else ++it;
    }
    // (Joined outside the lock: take() never waits for a relay's threads.)
}

}  // namespace deputy::agent
