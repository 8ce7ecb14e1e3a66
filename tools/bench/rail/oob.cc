#include "bench/rail/oob.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

#include "bench/rail/rail_error.h"
#include "common/timing.h"

namespace deputy::rail {
namespace {

double now_s() { return double(timing::now_ns()) * 1e-9; }

// Milliseconds left until `deadline_s` for poll(); -1 for "no deadline".
int poll_ms(double deadline_s) {
    if (std::isinf(deadline_s)) return -1;
    double left = deadline_s - now_s();
    return left <= 0 ? 0 : int(std::ceil(left * 1000));
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g s", s);
    return buf;
}

}  // namespace

std::string HostPort::text() const {
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

HostPort parse_host_port(std::string_view text, uint16_t default_port, const char *flag) {
    HostPort out;
    out.port = default_port;
    std::string_view port_text;
    if (text.empty()) throw RailError(std::string(flag) + " is empty (expected HOST or HOST:PORT)");
    if (text.front() == '[') {
        size_t close = text.find(']');
        if (close == std::string_view::npos)
            throw RailError(std::string(flag) + " '" + std::string(text) + "': missing ']'");
        out.host = std::string(text.substr(1, close - 1));
        std::string_view rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':')
                throw RailError(std::string(flag) + " '" + std::string(text) +
                                "': expected ':PORT' after ']'");
            port_text = rest.substr(1);
        }
    } else {
        size_t colon = text.rfind(':');
        if (colon != std::string_view::npos && text.find(':') == colon) {
            out.host = std::string(text.substr(0, colon));
            port_text = text.substr(colon + 1);
        } else {
            out.host = std::string(text);  // a name, IPv4, or a bare IPv6 address
        }
    }
    if (out.host.empty())
        throw RailError(std::string(flag) + " '" + std::string(text) + "': the host is empty");
    if (!port_text.empty() || (text.back() == ':')) {
        unsigned value = 0;
        auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
        if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value < 1 ||
            value > 65535)
            throw RailError(std::string(flag) + " '" + std::string(text) + "': port '" +
                            std::string(port_text) + "' is not a number in 1-65535");
        out.port = uint16_t(value);
    }
    return out;
}

// ---------------------------------------------------------------- Socket

Socket::~Socket() { close(); }

Socket::Socket(Socket &&other) noexcept
    : fd_(std::exchange(other.fd_, -1)), peer_(std::move(other.peer_)) {}

Socket &Socket::operator=(Socket &&other) noexcept {
    if (this != &other) {
        close();
        fd_ = std::exchange(other.fd_, -1);
        peer_ = std::move(other.peer_);
    }
    return *this;
}

void Socket::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

sockaddr_storage Socket::local_address() const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(fd_, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
        throw RailError("getsockname on the connection to " + peer_ + ": " + errno_text(errno));
    return addr;
}

void Socket::write_all(const void *data, size_t len, double timeout_s) {
    const char *p = static_cast<const char *>(data);
    double deadline = now_s() + timeout_s;
    while (len > 0) {
        pollfd pfd{fd_, POLLOUT, 0};
        int ready = ::poll(&pfd, 1, poll_ms(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0)
            throw RailError("sending to " + peer_ + " timed out after " + seconds_text(timeout_s));
        ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            throw RailError("sending to " + peer_ + " failed: " + errno_text(errno));
        }
        p += n;
        len -= size_t(n);
    }
}

void Socket::read_all(void *data, size_t len, double deadline_s, const char *waiting_for) {
    char *p = static_cast<char *>(data);
    while (len > 0) {
        pollfd pfd{fd_, POLLIN, 0};
        int ready = ::poll(&pfd, 1, poll_ms(deadline_s));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0)
            throw RailError(std::string("timed out waiting for ") + waiting_for + " from " + peer_);
        ssize_t n = ::recv(fd_, p, len, MSG_DONTWAIT);
        if (n == 0)
            throw RailError(peer_ + " closed the connection while this side waited for " +
                            waiting_for);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            throw RailError("receiving " + std::string(waiting_for) + " from " + peer_ +
                            " failed: " + errno_text(errno));
        }
        p += n;
        len -= size_t(n);
    }
}

void Socket::send(MsgType type, const nlohmann::json &body, double timeout_s) {
    std::string payload = body.dump();
    if (payload.size() > kMaxFrame) throw RailError("control message too large");
    uint32_t header[3] = {htonl(kWireMagic), htonl(uint32_t(type)), htonl(uint32_t(payload.size()))};
    std::string frame(reinterpret_cast<const char *>(header), sizeof(header));
    frame += payload;
    write_all(frame.data(), frame.size(), timeout_s);
}

Frame Socket::expect(MsgType want, const char *peer_role, double timeout_s) {
    Frame f = receive(timeout_s, msg_name(want));
    if (f.type == MsgType::kError)
        throw RailError(std::string("the ") + peer_role + " reported: " +
                        f.body.value("message", std::string("?")));
    if (f.type != want)
        throw RailError(peer_ + " sent " + msg_name(f.type) + " where " + msg_name(want) +
                        " was expected");
    return f;
}

Frame Socket::receive(double timeout_s, const char *waiting_for) {
    double deadline = now_s() + timeout_s;
    uint32_t header[3];
    read_all(header, sizeof(header), deadline, waiting_for);
    uint32_t magic = ntohl(header[0]), raw_type = ntohl(header[1]), len = ntohl(header[2]);
    if (magic != kWireMagic)
        throw RailError(peer_ + " is not a deputy rail peer (bad magic 0x" +
                        [&] { char b[16]; std::snprintf(b, sizeof(b), "%08x", magic); return std::string(b); }() +
                        " while waiting for " + waiting_for + ")");
    if (!msg_type_valid(uint16_t(raw_type)) || raw_type > 0xffff)
        throw RailError(peer_ + " sent an unknown message type " + std::to_string(raw_type));
    if (len > kMaxFrame)
        throw RailError(peer_ + " sent a " + std::to_string(len) + "-byte message (limit " +
                        std::to_string(kMaxFrame) + ")");
    std::string payload(len, '\0');
    read_all(payload.data(), len, deadline + 5.0, waiting_for);
    Frame frame;
    frame.type = MsgType(raw_type);
    try {
        frame.body = nlohmann::json::parse(payload);
    } catch (const nlohmann::json::exception &e) {
        throw RailError(peer_ + " sent a malformed " + msg_name(frame.type) + ": " + e.what());
    }
    if (!frame.body.is_object())
        throw RailError(peer_ + " sent a " + msg_name(frame.type) + " that is not a JSON object");
    return frame;
}

std::optional<Frame> Socket::poll_frame(double timeout_s, const char *waiting_for) {
    pollfd pfd{fd_, POLLIN, 0};
    int ready = ::poll(&pfd, 1, int(timeout_s * 1000));
    if (ready <= 0) return std::nullopt;
    return receive(5.0, waiting_for);
}

// ---------------------------------------------------------------- Listener

Listener::Listener(const std::string &bind, uint16_t port) {
    where_ = HostPort{bind, port}.text();
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo *res = nullptr;
    std::string service = std::to_string(port);
    int gai = getaddrinfo(bind.c_str(), service.c_str(), &hints, &res);
    if (gai != 0)
        throw RailError("--bind '" + bind + "': cannot resolve: " + gai_strerror(gai));
    int err = 0;
    for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 4) == 0) {
            fd_ = fd;
            break;
        }
        err = errno;
        ::close(fd);
    }
    freeaddrinfo(res);
    if (fd_ < 0)
        throw RailError("cannot listen on " + where_ + " (--bind/--port): " + errno_text(err));
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr *>(&addr), &len);
    port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port
                                             : reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
}

Listener::~Listener() {
    if (fd_ >= 0) ::close(fd_);
}

Socket Listener::accept(double timeout_s, const std::atomic<bool> *cancel) {
    double deadline = timeout_s > 0 ? now_s() + timeout_s : INFINITY;
    for (;;) {
        if (cancel != nullptr && cancel->load()) throw RailError("server cancelled before a client connected");
        pollfd pfd{fd_, POLLIN, 0};
        int slice = std::min(poll_ms(deadline) < 0 ? 100 : poll_ms(deadline), 100);
        int ready = ::poll(&pfd, 1, slice);
        if (ready < 0 && errno != EINTR)
            throw RailError("waiting for a client on port " + std::to_string(port_) + ": " +
                            errno_text(errno));
        if (ready > 0) {
            sockaddr_storage peer{};
            socklen_t len = sizeof(peer);
            int fd = ::accept4(fd_, reinterpret_cast<sockaddr *>(&peer), &len, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
                throw RailError("accept on port " + std::to_string(port_) + ": " + errno_text(errno));
            }
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
            getnameinfo(reinterpret_cast<sockaddr *>(&peer), len, host, sizeof(host), serv,
                        sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
            return Socket(fd, "client " + HostPort{host, uint16_t(std::atoi(serv))}.text());
        }
        if (now_s() >= deadline)
            throw RailError("no client connected to port " + std::to_string(port_) + " within " +
                            seconds_text(timeout_s) + " (--accept-timeout)");
    }
}

// ---------------------------------------------------------------- connect

Socket connect_to(const HostPort &target, double timeout_s) {
    std::string where = "server " + target.text();
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo *res = nullptr;
    std::string service = std::to_string(target.port);
    int gai = getaddrinfo(target.host.c_str(), service.c_str(), &hints, &res);
    if (gai != 0)
        throw RailError("--connect " + target.text() + ": cannot resolve host '" + target.host +
                        "': " + gai_strerror(gai));
    std::string last_error = "no address";
    double deadline = now_s() + timeout_s;
    for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        ai->ai_protocol);
        if (fd < 0) {
            last_error = errno_text(errno);
            continue;
        }
        int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd pfd{fd, POLLOUT, 0};
            int ready;
            do {
                ready = ::poll(&pfd, 1, poll_ms(deadline));
            } while (ready < 0 && errno == EINTR);
            if (ready == 0) {
                ::close(fd);
                last_error = "timed out after " + seconds_text(timeout_s) + " (--timeout)";
                continue;
            }
            int err = 0;
            socklen_t len = sizeof(err);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            rc = err == 0 ? 0 : -1;
            errno = err;
        }
        if (rc != 0) {
            last_error = errno_text(errno);
            ::close(fd);
            continue;
        }
        int flags = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        freeaddrinfo(res);
        return Socket(fd, where);
    }
    freeaddrinfo(res);
    throw RailError("cannot connect to " + where + ": " + last_error);
}

}  // namespace deputy::rail
