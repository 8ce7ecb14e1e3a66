// The out-of-band TCP connection that carries addresses, keys and results
// (see wire.h). Every wait is bounded: connect, accept and receive take a
// timeout and fail with a message naming the peer and what was awaited.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "bench/rail/wire.h"

namespace deputy::rail {

struct HostPort {
    std::string host;
    uint16_t port = 0;
    std::string text() const;  // "host:port", IPv6 in brackets
};

// "host", "host:port", "[v6]:port", "[v6]". Throws RailError naming `flag`.
HostPort parse_host_port(std::string_view text, uint16_t default_port, const char *flag);

class Socket {
public:
    Socket() = default;
    Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
    ~Socket();
    Socket(Socket &&other) noexcept;
    Socket &operator=(Socket &&other) noexcept;
    Socket(const Socket &) = delete;
    Socket &operator=(const Socket &) = delete;

    bool valid() const { return fd_ >= 0; }
    int fd() const { return fd_; }
    const std::string &peer() const { return peer_; }
    // The local address of the connection: the interface that routes to the peer.
    sockaddr_storage local_address() const;

    void send(MsgType type, const nlohmann::json &body, double timeout_s);
    // Waits up to timeout_s for a whole frame; `waiting_for` names it in errors.
    Frame receive(double timeout_s, const char *waiting_for);
    // receive() of a frame of type `want`: an ERROR frame throws its message
    // ("the client reported: ..."), any other type throws naming both.
    Frame expect(MsgType want, const char *peer_role, double timeout_s);
    // A frame if one has started to arrive, else nullopt (never blocks long).
    std::optional<Frame> poll_frame(double timeout_s, const char *waiting_for);
    void close();

private:
    void write_all(const void *data, size_t len, double timeout_s);
    void read_all(void *data, size_t len, double deadline_s, const char *waiting_for);

    int fd_ = -1;
    std::string peer_;
};

class Listener {
public:
    // Binds and listens; port 0 picks a free port (see port()).
    Listener(const std::string &bind, uint16_t port);
    ~Listener();
    Listener(const Listener &) = delete;
    Listener &operator=(const Listener &) = delete;

    uint16_t port() const { return port_; }
    // Waits up to timeout_s (0: forever) for one client; returns early with
    // an error when `cancel` becomes true.
    Socket accept(double timeout_s, const std::atomic<bool> *cancel);

private:
    int fd_ = -1;
    uint16_t port_ = 0;
    std::string where_;
};

// Connects within timeout_s; throws RailError naming the address and errno.
Socket connect_to(const HostPort &target, double timeout_s);

}  // namespace deputy::rail
