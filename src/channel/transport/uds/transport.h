// uds transport: frames over a Unix domain stream socket. The baseline for
// the shm rings, the agent's control connection, and the carrier of shm
// segments (SCM_RIGHTS, see socket_io.h).
//
// Addresses: a filesystem path ("/run/user/1000/deputy/agent.sock"), or
// "@name" for Linux's abstract namespace (no file to clean up; used by tests;
// note that abstract names ignore file permissions, so the agent should use
// a path in a 0700 directory and check SO_PEERCRED).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "channel/socket_io.h"
#include "channel/transport.h"
#include "common/fd.h"

namespace deputy::channel::uds {

class Listener {
  public:
    // Binds and listens. A leftover socket file that nobody listens on any
    // more is replaced; a live one is DP_ERR_IO ("address in use").
    static dp_status_t listen(const std::string &address, std::unique_ptr<Listener> *out);
    ~Listener();  // closes, and unlinks the socket file if it is still ours

    // One connection, as a raw socket (non-blocking, close-on-exec): for the
    // agent, which checks credentials and passes fds before choosing a
    // transport. DP_ERR_TIMEOUT if nobody connects in time; DP_ERR_TOO_LARGE,
    // logging nothing, when this process is out of file descriptors.
    dp_status_t accept_fd(int64_t timeout_ns, UniqueFd *out);
    // One connection as a uds transport; `creds` (optional) gets the peer's
    // SO_PEERCRED.
    dp_status_t accept(const TransportOptions &options, int64_t timeout_ns,
                       std::unique_ptr<Transport> *out, sock::PeerCredentials *creds = nullptr);

    const std::string &address() const { return address_; }
    int fd() const { return fd_.get(); }

  private:
    UniqueFd fd_;
    std::string address_;
    dev_t dev_ = 0;  // identity of the socket file we created, for unlink
    ino_t ino_ = 0;
};

// Connects within the timeout, retrying while nothing listens yet (the peer
// may start a moment later). DP_ERR_NO_AGENT if nobody answered in time.
dp_status_t connect_fd(const std::string &address, int64_t timeout_ns, UniqueFd *out);
dp_status_t connect(const std::string &address, const TransportOptions &options, int64_t timeout_ns,
                    std::unique_ptr<Transport> *out);

// A uds transport over an already connected Unix stream socket.
dp_status_t wrap(UniqueFd fd, const std::string &peer, const TransportOptions &options,
                 std::unique_ptr<Transport> *out);

}  // namespace deputy::channel::uds
