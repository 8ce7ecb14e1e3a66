#include "channel/socket_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/check.h"
#include "common/sys_error.h"

namespace deputy::channel::sock {

dp_status_t status_from_errno(int err) {
    switch (err) {
        case EPIPE:
        case ECONNRESET:
        case ENOTCONN:
        case ECONNABORTED:
        case ESHUTDOWN:
        case ETIMEDOUT:  // TCP gave up retransmitting: the peer host is gone
        case EHOSTUNREACH:
        case ENETUNREACH:
            return DP_ERR_AGENT_LOST;
        default:
            return DP_ERR_IO;
    }
}

dp_status_t set_nonblocking(int fd, const char *where) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        DP_FAIL_ERRNO(DP_ERR_IO, "{}: O_NONBLOCK", where);
    return DP_OK;
}

dp_status_t wait_fd(int fd, short events, const Deadline &deadline, const char *where) {
    for (;;) {
        pollfd p{fd, events, 0};
        int rc = poll(&p, 1, deadline.poll_ms());
        if (rc > 0) return DP_OK;
        if (rc == 0) {
            if (deadline.expired()) return DP_ERR_TIMEOUT;
            continue;  // poll's millisecond rounding woke us a little early
        }
        if (errno == EINTR) continue;
        DP_FAIL_ERRNO(DP_ERR_IO, "{}: poll", where);
    }
}

bool peer_hung_up(int fd) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        // Nothing is ever sent on a liveness socket, so readable means EOF or
        // an error; peek to tell data (harmless, left in place) from EOF.
        char byte;
        ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
    }
    return false;
}

dp_status_t wait_next_message(int fd, int64_t timeout_ns, const char *where) {
    const Deadline deadline(timeout_ns);
    for (;;) {
        DP_CHECK(wait_fd(fd, POLLIN, deadline, where));
        char byte;
        const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) return DP_OK;
        if (n == 0) return DP_ERR_AGENT_LOST;
        if (errno == EAGAIN || errno == EINTR) continue;
        const int err = errno;
        if (status_from_errno(err) == DP_ERR_AGENT_LOST) return DP_ERR_AGENT_LOST;
        DP_FAIL(DP_ERR_IO, "{}: recv: {}", where, std::strerror(err));
    }
}

dp_status_t send_with_fds(int fd, const void *data, size_t length, const int *fds, size_t nfds,
                          int64_t timeout_ns, const char *where) {
    if (length == 0 || nfds > kMaxFdsPerMessage)
        DP_FAIL(DP_ERR_INVALID, "{}: send_with_fds: {} bytes, {} fds", where, length, nfds);
    Deadline deadline(timeout_ns);
    const char *bytes = static_cast<const char *>(data);
    size_t sent = 0;
    bool fds_sent = nfds == 0;
    while (sent < length) {
        iovec iov{const_cast<char *>(bytes + sent), length - sent};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
        if (!fds_sent) {
            msg.msg_control = control;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
            cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
            std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            sent += size_t(n);
            fds_sent = true;  // the fds ride on the first byte that went out
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            dp_status_t s = wait_fd(fd, POLLOUT, deadline, where);
            if (s == DP_ERR_TIMEOUT)
                DP_FAIL(s, "{}: timed out sending {} bytes with fds", where, length);
            DP_CHECK(s);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        int err = n < 0 ? errno : EPIPE;
        DP_FAIL(status_from_errno(err), "{}: sendmsg with {} fd(s): {}", where, nfds,
                std::strerror(err));
    }
    return DP_OK;
}

dp_status_t recv_with_fds(int fd, void *data, size_t length, UniqueFd *fds, size_t max_fds,
                          size_t *nfds, int64_t timeout_ns, const char *where) {
    *nfds = 0;
    if (length == 0 || max_fds > kMaxFdsPerMessage)
        DP_FAIL(DP_ERR_INVALID, "{}: recv_with_fds: {} bytes, {} fds", where, length, max_fds);
    Deadline deadline(timeout_ns);
    char *bytes = static_cast<char *>(data);
    size_t got = 0;
    while (got < length) {
        iovec iov{bytes + got, length - got};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        // Always offer a control buffer, even after the fds arrived: fds
        // sent on a later byte must be received (and closed) rather than
        // silently dropped, so that the refusal below can name them.
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            dp_status_t s = wait_fd(fd, POLLIN, deadline, where);
            if (s == DP_ERR_TIMEOUT) {
                for (size_t i = 0; i < *nfds; ++i) fds[i].reset();
                *nfds = 0;
                return s;
            }
            DP_CHECK(s);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        // Take ownership of whatever fds arrived before judging anything,
        // so every return path below closes them.
        size_t arrived = 0;
        UniqueFd extra[kMaxFdsPerMessage];
        for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count && arrived < kMaxFdsPerMessage; ++i) {
                int received;
                std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                extra[arrived++].reset(received);
            }
        }
        auto refuse = [&](const char *why) {
            for (size_t i = 0; i < *nfds; ++i) fds[i].reset();
            *nfds = 0;
            DP_LOG_ERROR("{}: {}", where, why);
            return DP_ERR_INVALID;
        };
        if (msg.msg_flags & MSG_CTRUNC) return refuse("the peer attached more fds than expected");
        if (arrived > 0 && got > 0) return refuse("the peer attached fds to a later byte");
        if (arrived > max_fds) return refuse("the peer attached more fds than expected");
        for (size_t i = 0; i < arrived; ++i) fds[(*nfds)++] = std::move(extra[i]);
        if (n == 0) {
            for (size_t i = 0; i < *nfds; ++i) fds[i].reset();
            *nfds = 0;
            DP_FAIL(DP_ERR_AGENT_LOST, "{}: the peer closed the connection during setup", where);
        }
        if (n < 0) {
            int err = errno;
            for (size_t i = 0; i < *nfds; ++i) fds[i].reset();
            *nfds = 0;
            DP_FAIL(status_from_errno(err), "{}: recvmsg: {}", where, std::strerror(err));
        }
        got += size_t(n);
    }
    return DP_OK;
}

dp_status_t peer_credentials(int fd, PeerCredentials *out) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        DP_FAIL_ERRNO(DP_ERR_IO, "SO_PEERCRED");
    out->pid = cred.pid;
    out->uid = cred.uid;
    out->gid = cred.gid;
    return DP_OK;
}

size_t set_buffer_sizes(int fd, size_t bytes, const char *where) {
    if (bytes > 0) {
        int value = int(std::min<size_t>(bytes, size_t(INT32_MAX / 2)));
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, sizeof(value)) != 0 ||
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof(value)) != 0) {
            const int err = errno;  // the logger may overwrite errno
            DP_LOG_WARN("{}: setting socket buffers to {} bytes: {}", where, bytes,
                        std::strerror(err));
        }
    }
    int granted = 0;
    socklen_t len = sizeof(granted);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &len) != 0) return 0;
    return size_t(granted);
}

}  // namespace deputy::channel::sock
