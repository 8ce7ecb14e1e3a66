// Remote clients (`deputy agent --listen tcp://ADDR:PORT --key FILE`): the
// gate's thread accepts TCP connections and runs each one's secure
// handshake on a thread of its own, at most max_handshakes at once (a new
// connection beyond them evicts the oldest still shaking hands) and each
// within handshake_timeout; an authenticated peer is put behind a relay
// (channel/relay.h), whose local socket the service thread then serves as
// it serves a local client's, marked remote (no process, no shared memory:
// staged mode only). An unauthenticated peer, the cipher and a slow network
// never cost the service thread time; a peer with another key is closed.
//
// Plain TCP (insecure) skips the handshake: the operator asked for it, and
// the agent says so when it starts.
#pragma once

#include <deputy/status.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "channel/key_file.h"
#include "channel/relay.h"
#include "channel/transport/tcp/transport.h"
#include "common/fd.h"

namespace deputy::agent {

struct RemoteGateConfig {
    std::string address;    // "127.0.0.1:7000", ":7000"
    std::string key_file;   // empty only when insecure
    bool insecure = false;  // plain TCP
    uint32_t max_handshakes = 16;
    int64_t handshake_timeout_ns = 2'000'000'000;
    // A remote client whose host or link went silent is dropped within
    // about this long (channel::tcp::bound_silence).
    int64_t silence_ns = 10'000'000'000;
    size_t max_message = 0;  // the control protocol's limit
};

class RemoteGate {
  public:
    // Loads the key, listens and starts the thread. Errors name the flag's
    // value: the address, the key file.
    static dp_status_t open(const RemoteGateConfig &config, std::unique_ptr<RemoteGate> *out);
    ~RemoteGate();  // stops accepting, ends every relay, joins every thread
    RemoteGate(const RemoteGate &) = delete;
    RemoteGate &operator=(const RemoteGate &) = delete;

    // "tcp://127.0.0.1:41234": the bound address, with the real port.
    std::string address() const { return "tcp://" + listener_->address(); }
    bool secure() const { return !config_.insecure; }
    // Readable (an eventfd) when take() has connections for the service thread.
    int fd() const { return ready_.get(); }

    struct Admitted {
        UniqueFd socket;   // the relay's local end
        std::string peer;  // "10.0.0.2:51234"
    };
    std::vector<Admitted> take();

    struct Counters {
        uint64_t accepted = 0;     // TCP connections
        uint64_t admitted = 0;     // handed to the service thread
        uint64_t failed = 0;       // handshakes that failed or timed out
        uint64_t evicted = 0;      // handshakes cut for a newer connection
    };
    Counters counters() const;
    // Relays alive (remote clients and team proxies' links), for the fd budget.
    size_t live_relays() const;
    uint32_t max_handshakes() const { return config_.max_handshakes; }

  private:
    struct Handshake;
    RemoteGate() = default;
    void run();
    void start_handshake(UniqueFd conn, std::string peer);
    void reap(bool all);

    RemoteGateConfig config_;
    channel::secure::Key key_;
    std::unique_ptr<channel::tcp::Listener> listener_;
    UniqueFd stop_;   // eventfd: ends run()
    UniqueFd ready_;  // eventfd: take() has something
    std::thread thread_;

    mutable std::mutex mu_;
    std::list<std::unique_ptr<Handshake>> handshakes_;      // gate thread only
    std::list<std::unique_ptr<channel::Relay>> relays_;     // under mu_
    std::vector<Admitted> admitted_;                        // under mu_
    Counters counters_;                                     // under mu_
};

}  // namespace deputy::agent
