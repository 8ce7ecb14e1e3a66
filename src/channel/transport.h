// The transport interface: one message at a time between two peers, over
// shared-memory rings (transport/shm), a Unix socket (transport/uds) or TCP
// (transport/tcp), optionally wrapped in a secure session (secure.h). Code
// above the channel (the agent, the client, the benchmark) sees only this.
//
// Contract, the same for every transport:
//  - Messages arrive whole, in order, exactly once, with their type; a
//    message is at most max_message() bytes. send() refuses a larger one with
//    DP_ERR_TOO_LARGE before anything is written, and the channel stays usable.
//  - Full duplex: one thread may be in send() while another is in recv().
//    Two threads must not send (or receive) at the same time.
//  - timeout_ns bounds each call: < 0 waits forever, 0 only polls. A timeout
//    before the first byte of a message is DP_ERR_TIMEOUT and harmless; a
//    message cut by its deadline midway breaks the channel (the stream would
//    lose its framing), and every later call returns DP_ERR_IO.
//  - The peer closing, dying or being shut down is DP_ERR_AGENT_LOST (after
//    the messages it sent before are delivered). A malformed frame from the
//    peer is DP_ERR_INVALID (or DP_ERR_TOO_LARGE above the limit), a failed
//    authentication DP_ERR_DENIED; both break the channel for good.
//  - Every error is logged with its reason on the library ("sdk") logger: at
//    error level for failures, at debug level for timeouts and orderly closes,
//    which are part of normal operation for an agent.
//  - shutdown() may be called from any thread at any time: blocked calls
//    return DP_ERR_AGENT_LOST promptly, and the peer sees the channel close.
#pragma once

#include <deputy/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "channel/message.h"
#include "common/timing.h"

namespace deputy::channel {

inline constexpr int64_t kWaitForever = -1;

struct TransportOptions {
    // Largest payload accepted in either direction (see message.h).
    size_t max_message = kDefaultMaxMessage;
    // shm: ring capacity per direction (power of two, >= 64; 0: 1 MiB).
    // Sockets: SO_SNDBUF and SO_RCVBUF (0: the kernel's default).
    size_t buffer_bytes = 0;
    // shm: how long a waiting side polls before it sleeps on the futex. Polling
    // keeps latency low while the peer is busy; sleeping frees the core.
    int64_t spin_ns = 20000;
    // shm: how often a sleeping side wakes to check that the peer process is
    // still alive, which bounds how long a dead peer can go unnoticed.
    int64_t liveness_check_ns = 10'000'000;
};

class Transport {
  public:
    virtual ~Transport() = default;

    // Sends one message of `length` bytes (payload may be null when length is 0).
    virtual dp_status_t send(MsgType type, const void *payload, size_t length,
                             int64_t timeout_ns) = 0;

    // Receives one message into `buffer` (`capacity` bytes; give max_message()
    // to accept anything the peer may send). A message longer than capacity
    // is DP_ERR_TOO_LARGE and breaks the channel.
    virtual dp_status_t recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                             int64_t timeout_ns) = 0;

    virtual size_t max_message() const = 0;

    // Closes both directions; see the contract above. Idempotent.
    virtual void shutdown() = 0;

    // "shm", "uds", "tcp", "secure+tcp", ...
    virtual std::string kind() const = 0;
    // The peer's address as the transport knows it ("/run/x.sock", "10.0.0.2:7000").
    virtual std::string peer() const = 0;
    // The buffering actually in effect: ring bytes per direction or the socket
    // send buffer the kernel granted.
    virtual size_t buffer_bytes() const = 0;
};

// A deadline from a timeout, so that a call made of several waits (header,
// then payload) honours one bound in total. The clock starts at the first
// question asked, not at construction: a call that never waits (the fast
// path) never reads the clock, which costs as much as a small message.
class Deadline {
  public:
    explicit Deadline(int64_t timeout_ns) : timeout_ns_(timeout_ns) {}
    bool forever() const { return timeout_ns_ < 0; }
    // Nanoseconds left: -1 for forever, 0 once passed.
    int64_t remaining_ns() const {
        if (timeout_ns_ < 0) return -1;
        int64_t left = end_ns() - int64_t(timing::now_ns());
        return left > 0 ? left : 0;
    }
    bool expired() const { return remaining_ns() == 0; }
    // For poll(): milliseconds left, rounded up so a short wait still waits.
    int poll_ms() const {
        int64_t left = remaining_ns();
        if (left < 0) return -1;
        int64_t ms = (left + 999999) / 1000000;
        return ms > 1000000 ? 1000000 : int(ms);
    }

  private:
    int64_t end_ns() const {
        if (end_ns_ < 0) end_ns_ = int64_t(timing::now_ns()) + timeout_ns_;
        return end_ns_;
    }
    int64_t timeout_ns_;
    mutable int64_t end_ns_ = -1;
};

}  // namespace deputy::channel
