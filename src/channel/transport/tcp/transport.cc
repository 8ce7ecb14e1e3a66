#include "channel/transport/tcp/transport.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "channel/socket_io.h"
#include "channel/stream_transport.h"
#include "common/check.h"
#include "common/sys_error.h"

namespace deputy::channel::tcp {
namespace {

constexpr int64_t kConnectRetryNs = 10'000'000;

std::string format_address(const sockaddr *sa) {
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (sa->sa_family == AF_INET) {
        auto *in = reinterpret_cast<const sockaddr_in *>(sa);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        return std::string(host) + ":" + std::to_string(port);
    }
    auto *in6 = reinterpret_cast<const sockaddr_in6 *>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    // fmt, not operator+: GCC 12 -O3 warns (-Wrestrict) on "[" + std::string.
    return fmt::format("[{}]:{}", host, port);
}

struct AddrInfo {
    addrinfo *list = nullptr;
    ~AddrInfo() {
        if (list) freeaddrinfo(list);
    }
};

dp_status_t resolve(const std::string &address, bool passive, AddrInfo *out) {
    std::string host, port;
    DP_CHECK(split_host_port(address, &host, &port));
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &out->list);
    if (rc != 0) DP_FAIL(DP_ERR_INVALID, "tcp {}: cannot resolve: {}", address, gai_strerror(rc));
    return DP_OK;
}

void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

dp_status_t split_host_port(const std::string &address, std::string *host, std::string *port) {
    host->clear();
    port->clear();
    if (address.empty()) DP_FAIL(DP_ERR_INVALID, "tcp: empty address (give host:port)");
    if (address[0] == '[') {
        size_t close = address.find(']');
        if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':')
            DP_FAIL(DP_ERR_INVALID, "tcp: '{}' is not [v6address]:port", address);
        *host = address.substr(1, close - 1);
        *port = address.substr(close + 2);
    } else {
        size_t colon = address.rfind(':');
        if (colon == std::string::npos) {
            *port = address;
        } else {
            if (address.find(':') != colon)
                DP_FAIL(DP_ERR_INVALID, "tcp: '{}': write IPv6 addresses as [addr]:port", address);
            *host = address.substr(0, colon);
            *port = address.substr(colon + 1);
        }
    }
    if (port->empty() || port->size() > 5 ||
        port->find_first_not_of("0123456789") != std::string::npos || std::stoul(*port) > 65535)
        DP_FAIL(DP_ERR_INVALID, "tcp: '{}': the port must be a number 0..65535", address);
    return DP_OK;
}

dp_status_t Listener::listen(const std::string &address, std::unique_ptr<Listener> *out) {
    AddrInfo ai;
    DP_CHECK(resolve(address, true, &ai));
    int last_error = 0;
    for (addrinfo *a = ai.list; a != nullptr; a = a->ai_next) {
        UniqueFd fd(
            socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        if (!fd) {
            last_error = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 64) != 0) {
            last_error = errno;
            continue;
        }
        sockaddr_storage bound{};
        socklen_t len = sizeof(bound);
        getsockname(fd.get(), reinterpret_cast<sockaddr *>(&bound), &len);
        auto listener = std::unique_ptr<Listener>(new Listener());
        listener->fd_ = std::move(fd);
        listener->address_ = format_address(reinterpret_cast<sockaddr *>(&bound));
        DP_LOG_DEBUG("tcp: listening on {}", listener->address_);
        *out = std::move(listener);
        return DP_OK;
    }
    DP_FAIL(DP_ERR_IO, "tcp listen {}: {}", address, std::strerror(last_error));
}

dp_status_t Listener::accept_fd(int64_t timeout_ns, UniqueFd *out, std::string *peer) {
    Deadline deadline(timeout_ns);
    for (;;) {
        sockaddr_storage from{};
        socklen_t len = sizeof(from);
        UniqueFd conn(accept4(fd_.get(), reinterpret_cast<sockaddr *>(&from), &len,
                              SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (conn) {
            set_nodelay(conn.get());
            if (peer) *peer = format_address(reinterpret_cast<sockaddr *>(&from));
            *out = std::move(conn);
            return DP_OK;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            DP_FAIL_ERRNO(DP_ERR_IO, "tcp {}: accept", address_);
        dp_status_t s = sock::wait_fd(fd_.get(), POLLIN, deadline, "tcp accept");
        if (s == DP_ERR_TIMEOUT) {
            DP_LOG_DEBUG("tcp {}: nobody connected in time", address_);
            return s;
        }
        DP_CHECK(s);
    }
}

dp_status_t Listener::accept(const TransportOptions &options, int64_t timeout_ns,
                             std::unique_ptr<Transport> *out) {
    UniqueFd conn;
    std::string peer;
    DP_CHECK(accept_fd(timeout_ns, &conn, &peer));
    DP_LOG_DEBUG("tcp {}: accepted {}", address_, peer);
    return wrap(std::move(conn), peer, options, out);
}

dp_status_t connect_fd(const std::string &address, int64_t timeout_ns, UniqueFd *out) {
    AddrInfo ai;
    DP_CHECK(resolve(address, false, &ai));
    Deadline deadline(timeout_ns);
    int last_error = 0;
    for (;;) {
        for (addrinfo *a = ai.list; a != nullptr; a = a->ai_next) {
            UniqueFd fd(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                               a->ai_protocol));
            if (!fd) {
                last_error = errno;
                continue;
            }
            int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                dp_status_t s = sock::wait_fd(fd.get(), POLLOUT, deadline, "tcp connect");
                if (s == DP_ERR_TIMEOUT) {
                    last_error = ETIMEDOUT;
                    break;
                }
                DP_CHECK(s);
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
                rc = err == 0 ? 0 : -1;
                errno = err;
            }
            if (rc == 0) {
                set_nodelay(fd.get());
                *out = std::move(fd);
                return DP_OK;
            }
            last_error = errno;
        }
        if (last_error != ECONNREFUSED && last_error != ETIMEDOUT && last_error != EINTR &&
            last_error != EAGAIN)
            DP_FAIL(DP_ERR_NO_AGENT, "tcp connect {}: {}", address, std::strerror(last_error));
        int64_t left = deadline.remaining_ns();
        if (left == 0) break;
        std::this_thread::sleep_for(
            std::chrono::nanoseconds(left < 0 || left > kConnectRetryNs ? kConnectRetryNs : left));
    }
    DP_FAIL(DP_ERR_NO_AGENT, "tcp connect {}: nobody answered in time ({})", address,
            std::strerror(last_error));
}

dp_status_t connect(const std::string &address, const TransportOptions &options, int64_t timeout_ns,
                    std::unique_ptr<Transport> *out) {
    UniqueFd fd;
    DP_CHECK(connect_fd(address, timeout_ns, &fd));
    return wrap(std::move(fd), address, options, out);
}

dp_status_t bound_silence(int fd, int64_t bound_ns) {
    const int seconds = int(std::max<int64_t>(2, (bound_ns + 999'999'999) / 1'000'000'000));
    const int on = 1, idle = seconds / 2, interval = 1, count = seconds - seconds / 2;
    const unsigned user_timeout_ms = unsigned(seconds) * 1000;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms) != 0)
        DP_FAIL_ERRNO(DP_ERR_IO, "tcp: keepalive and user timeout of {} s", seconds);
    return DP_OK;
}

dp_status_t wrap(UniqueFd fd, const std::string &peer, const TransportOptions &options,
                 std::unique_ptr<Transport> *out) {
    auto t = std::make_unique<StreamTransport>(std::move(fd), "tcp", peer, options);
    if (!t->valid()) DP_FAIL(DP_ERR_IO, "tcp {}: cannot set up the socket", peer);
    *out = std::move(t);
    return DP_OK;
}

}  // namespace deputy::channel::tcp
