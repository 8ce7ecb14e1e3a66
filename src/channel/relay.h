// A remote peer behind a local socket: a Relay moves whole messages both
// ways between a transport to the peer (the secure session over TCP, or
// plain TCP where the operator asked for it) and one end of a Unix socket
// pair, on two threads of its own, and hands the other end to its owner.
//
// Why: the agent's service thread serves clients through non-blocking Unix
// sockets and must never wait on one of them; the client's control channel
// speaks the same frames over the same kind of socket. Behind a relay a
// remote peer looks to both exactly like a local one (frames, no fds), and
// what a remote peer costs — decrypting, a slow or silent network — stays
// on the relay's threads. The price is a copy of every message through the
// socket pair and two threads per remote connection.
//
// The relay ends when either side ends (the peer closes or fails
// authentication, the owner closes its end): it shuts both down, and
// finished() turns true. An owner that closes sends the peer an END first
// (the secure session's final frame), and a peer's END ends the relay as a
// close would: an orderly close is told from a cut stream. Frames carry no
// fds: a frame the owner sends with fds attached loses them (the kernel
// closes them unread).
#pragma once

#include <deputy/status.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "channel/transport.h"
#include "common/fd.h"

namespace deputy::channel {

class Relay {
  public:
    // Starts relaying `remote`; *local is the owner's end of the pair (a
    // non-blocking, close-on-exec Unix stream socket, as a connected
    // client's is). Messages up to max_message bytes pass (at most
    // remote->max_message()).
    static dp_status_t start(std::unique_ptr<Transport> remote, size_t max_message, UniqueFd *local,
                             std::unique_ptr<Relay> *out);
    ~Relay();  // shuts both sides down and joins the threads
    Relay(const Relay &) = delete;
    Relay &operator=(const Relay &) = delete;

    bool finished() const { return finished_.load(std::memory_order_acquire) == 2; }
    // Ends it now (both sides shut down); the threads finish promptly.
    void shutdown();
    const std::string &peer() const { return peer_; }

  private:
    Relay() = default;
    void pump(Transport *from, Transport *to, size_t max_message);
    void send_end();  // once, whichever thread gets there first

    std::unique_ptr<Transport> remote_;
    std::unique_ptr<Transport> local_;
    std::string peer_;
    std::atomic<int> finished_{0};  // threads done
    std::atomic<bool> peer_done_{false};  // the thread reading the peer ended
    std::mutex send_mu_;                  // the two threads may both send to the peer
    bool end_sent_ = false;               // under send_mu_
    std::thread up_, down_;
};

}  // namespace deputy::channel
