// tcp transport: frames over TCP, for an agent on another host (a DPU's Arm
// cores, another node). TCP_NODELAY is set on both ends: a channel sends
// whole messages and waits for answers, so Nagle's coalescing would only add
// delay. Plain TCP carries the bytes in clear: the endpoint layer (endpoint.h)
// refuses it unless it is wrapped in the secure session or the operator asks
// for it explicitly.
//
// Addresses: "host:port", "[v6addr]:port"; to listen on every interface
// ":port" or "port". Port 0 when listening picks a free port (see address()).
#pragma once

#include <memory>
#include <string>

#include "channel/transport.h"
#include "common/fd.h"

namespace deputy::channel::tcp {

class Listener {
  public:
    static dp_status_t listen(const std::string &address, std::unique_ptr<Listener> *out);

    dp_status_t accept_fd(int64_t timeout_ns, UniqueFd *out, std::string *peer = nullptr);
    dp_status_t accept(const TransportOptions &options, int64_t timeout_ns,
                       std::unique_ptr<Transport> *out);

    // The bound address with the real port ("127.0.0.1:41234").
    const std::string &address() const { return address_; }
    // The listening socket (non-blocking), for a poll loop of the caller's.
    int fd() const { return fd_.get(); }

  private:
    UniqueFd fd_;
    std::string address_;
};

// Connects within the timeout, retrying while the port refuses (the peer may
// start a moment later). DP_ERR_NO_AGENT if nobody answered in time.
dp_status_t connect_fd(const std::string &address, int64_t timeout_ns, UniqueFd *out);
dp_status_t connect(const std::string &address, const TransportOptions &options, int64_t timeout_ns,
                    std::unique_ptr<Transport> *out);

dp_status_t wrap(UniqueFd fd, const std::string &peer, const TransportOptions &options,
                 std::unique_ptr<Transport> *out);

// Bounds how long a peer that vanished without closing (its host down, a
// cut link) goes unnoticed on `fd`: keepalive probes after half the bound,
// one a second, and TCP_USER_TIMEOUT for data left unacknowledged, so a
// blocked call ends (DP_ERR_AGENT_LOST) within about the bound. Keepalive
// counts whole seconds: the bound is at least 2 s.
dp_status_t bound_silence(int fd, int64_t bound_ns);

// Splits "host:port" / "[v6]:port" / ":port" / "port". DP_ERR_INVALID with a
// message naming the address otherwise.
dp_status_t split_host_port(const std::string &address, std::string *host, std::string *port);

}  // namespace deputy::channel::tcp
