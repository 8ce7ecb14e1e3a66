// Socket helpers shared by the uds, tcp and shm transports: bounded waits,
// passing fds with SCM_RIGHTS (how a shm segment reaches the other process),
// and the peer's credentials (SO_PEERCRED, how the agent knows who connected).
#pragma once

#include <deputy/status.h>
#include <sys/types.h>

#include <cstddef>

#include "channel/transport.h"
#include "common/fd.h"

namespace deputy::channel::sock {

// The most fds one message carries, under the kernel's limit of 253 per
// message (SCM_MAX_FD). A team's board and its members' views (two per
// member) may be more: TEAM_READY carries the first ones and TEAM_VIEWS
// messages the rest (channel/control.h), so the team size is not bound by it.
inline constexpr size_t kMaxFdsPerMessage = 250;

// Maps a socket errno to a status: the peer going away (EPIPE, ECONNRESET,
// ENOTCONN, ...) is DP_ERR_AGENT_LOST, anything else DP_ERR_IO.
dp_status_t status_from_errno(int err);

dp_status_t set_nonblocking(int fd, const char *where);

// Waits until `events` (POLLIN/POLLOUT) are ready on fd or the deadline
// passes. Hang-up and errors count as ready: the read or write that follows
// reports them. DP_OK, DP_ERR_TIMEOUT (not logged), or DP_ERR_IO.
dp_status_t wait_fd(int fd, short events, const Deadline &deadline, const char *where);

// True when the peer of a connected socket has closed or reset it; never
// blocks. Used by transports whose data does not flow through the socket.
bool peer_hung_up(int fd);

// Waits up to timeout_ns (<0: no limit) for the next byte of a stream
// socket, before a message: DP_OK when there is one to read, DP_ERR_TIMEOUT,
// or DP_ERR_AGENT_LOST when the peer closed the connection there (a clean
// end, so nothing is logged; a read error is DP_ERR_IO, logged).
dp_status_t wait_next_message(int fd, int64_t timeout_ns, const char *where);
// Sends `length` bytes (at least 1) on a Unix stream socket with `nfds` fds
// attached to the first byte (SCM_RIGHTS). The fds stay open here; the
// receiver gets its own copies.
dp_status_t send_with_fds(int fd, const void *data, size_t length, const int *fds, size_t nfds,
                          int64_t timeout_ns, const char *where);

// Receives exactly `length` bytes and the fds attached to them (up to
// `max_fds`, each owned by `fds[i]` and close-on-exec). More fds than
// max_fds, or fds on a later byte, are refused with DP_ERR_INVALID and all of
// them closed, so a peer cannot leak descriptors into this process.
dp_status_t recv_with_fds(int fd, void *data, size_t length, UniqueFd *fds, size_t max_fds,
                          size_t *nfds, int64_t timeout_ns, const char *where);

struct PeerCredentials {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
};

// The credentials of the process at the other end of a Unix socket, as the
// kernel recorded them at connect() (SO_PEERCRED): they cannot be forged by
// the peer. DP_ERR_IO if the socket is not a connected Unix socket.
dp_status_t peer_credentials(int fd, PeerCredentials *out);

// Sets SO_SNDBUF and SO_RCVBUF to `bytes` (0: leave the kernel default) and
// returns the send buffer the kernel granted (Linux doubles the request and
// clamps it to net.core.wmem_max).
size_t set_buffer_sizes(int fd, size_t bytes, const char *where);

}  // namespace deputy::channel::sock
