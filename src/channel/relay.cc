#include "channel/relay.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "channel/transport/uds/transport.h"
#include "common/check.h"
#include "common/sys_error.h"

namespace deputy::channel {
namespace {

// How long a closing relay gives the peer to take its END.
constexpr int64_t kEndTimeoutNs = 1'000'000'000;

}  // namespace

dp_status_t Relay::start(std::unique_ptr<Transport> remote, size_t max_message, UniqueFd *local,
                         std::unique_ptr<Relay> *out) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0)
        DP_FAIL_ERRNO(DP_ERR_IO, "relay: socketpair");
    UniqueFd owner(pair[0]), ours(pair[1]);
    std::unique_ptr<Relay> r(new Relay());
    r->peer_ = remote->peer();
    max_message = std::min(max_message, remote->max_message());
    TransportOptions options;
    options.max_message = max_message;
    DP_CHECK(uds::wrap(std::move(ours), "relay to " + r->peer_, options, &r->local_));
    r->remote_ = std::move(remote);
    Relay *self = r.get();
    r->up_ = std::thread([self, max_message] {
        self->pump(self->remote_.get(), self->local_.get(), max_message);
    });
    r->down_ = std::thread([self, max_message] {
        self->pump(self->local_.get(), self->remote_.get(), max_message);
    });
    *local = std::move(owner);
    *out = std::move(r);
    return DP_OK;
}

void Relay::pump(Transport *from, Transport *to, size_t max_message) {
    const bool from_owner = from == local_.get();
    // Untouched until a message needs the bytes: an idle relay commits
    // none of its max_message.
    auto buffer = std::make_unique_for_overwrite<uint8_t[]>(max_message);
    for (;;) {
        MsgType type;
        size_t length = 0;
        if (from->recv(&type, buffer.get(), max_message, &length, kWaitForever) != DP_OK) {
            // The owner closed its end: the peer hears an orderly END (the
            // secure session's final frame), not a cut stream.
            if (from_owner) send_end();
            break;
        }
        // The peer's END: it closed in order; it hears ours back. (The
        // control protocol has no END of its own.)
        if (type == MsgType::kEnd) {
            if (!from_owner) send_end();
            break;
        }
        dp_status_t sent;
        if (to == remote_.get()) {
            std::lock_guard<std::mutex> lock(send_mu_);
            sent = end_sent_ ? DP_ERR_AGENT_LOST : to->send(type, buffer.get(), length,
                                                            kWaitForever);
        } else {
            sent = to->send(type, buffer.get(), length, kWaitForever);
        }
        if (sent != DP_OK) {
            // The owner went while the peer still talked: the peer hears
            // END too, and what it sent until its own END is dropped.
            if (!from_owner) {
                send_end();
                const Deadline deadline(kEndTimeoutNs);
                while (!deadline.expired() &&
                       from->recv(&type, buffer.get(), max_message, &length,
                                  deadline.remaining_ns()) == DP_OK &&
                       type != MsgType::kEnd) {
                }
            }
            break;
        }
    }
    if (from_owner) {
        // The peer answers our END with its own, which the other thread
        // reads: give it that long before cutting the session.
        local_->shutdown();
        for (int64_t waited = 0; waited < kEndTimeoutNs && !peer_done_.load(); waited += 1'000'000)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
        peer_done_.store(true);
    }
    shutdown();
    finished_.fetch_add(1, std::memory_order_acq_rel);
}

void Relay::send_end() {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (end_sent_) return;
    end_sent_ = true;
    remote_->send(MsgType::kEnd, nullptr, 0, kEndTimeoutNs);
}

void Relay::shutdown() {
    remote_->shutdown();
    local_->shutdown();
}

Relay::~Relay() {
    // As if the owner closed its end: the thread reading it sends the peer
    // its END and ends both sides once the peer's comes (or after
    // kEndTimeoutNs).
    local_->shutdown();
    if (down_.joinable()) down_.join();
    shutdown();
    if (up_.joinable()) up_.join();
}

}  // namespace deputy::channel
