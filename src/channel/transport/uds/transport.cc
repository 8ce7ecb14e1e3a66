#include "channel/transport/uds/transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "channel/stream_transport.h"
#include "common/check.h"
#include "common/sys_error.h"

namespace deputy::channel::uds {
namespace {

// How often connect() retries while the listener is not there yet.
constexpr int64_t kConnectRetryNs = 5'000'000;

dp_status_t make_address(const std::string &address, sockaddr_un *sa, socklen_t *len) {
    *sa = {};
    sa->sun_family = AF_UNIX;
    if (address.empty() || address == "@")
        DP_FAIL(DP_ERR_INVALID, "uds: empty socket address (give a path or @name)");
    if (address.size() >= sizeof(sa->sun_path))
        DP_FAIL(DP_ERR_INVALID, "uds: socket address '{}' is {} bytes, the limit is {}", address,
                address.size(), sizeof(sa->sun_path) - 1);
    std::memcpy(sa->sun_path, address.data(), address.size());
    // Abstract names start with a NUL byte and are not NUL-terminated: the
    // length says where they end.
    if (address[0] == '@') sa->sun_path[0] = '\0';
    *len =
        socklen_t(offsetof(sockaddr_un, sun_path) + address.size() + (address[0] == '@' ? 0 : 1));
    return DP_OK;
}

UniqueFd new_socket() {
    return UniqueFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
}

// True if something accepts connections at the address now.
bool someone_listens(const sockaddr_un &sa, socklen_t len) {
    UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) return true;  // cannot tell: do not delete anything
    return ::connect(probe.get(), reinterpret_cast<const sockaddr *>(&sa), len) == 0 ||
           errno != ECONNREFUSED;
}

}  // namespace

dp_status_t Listener::listen(const std::string &address, std::unique_ptr<Listener> *out) {
    sockaddr_un sa;
    socklen_t len;
    DP_CHECK(make_address(address, &sa, &len));
    UniqueFd fd = new_socket();
    if (!fd) DP_FAIL_ERRNO(DP_ERR_IO, "uds listen {}: socket", address);
    if (bind(fd.get(), reinterpret_cast<sockaddr *>(&sa), len) != 0) {
        int err = errno;
        if (err == EADDRINUSE && address[0] != '@' && !someone_listens(sa, len)) {
            // A socket file left by a process that died: replace it.
            struct stat st {};
            if (lstat(address.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(address.c_str());
            if (bind(fd.get(), reinterpret_cast<sockaddr *>(&sa), len) == 0)
                err = 0;
            else
                err = errno;
        }
        if (err != 0) DP_FAIL(DP_ERR_IO, "uds listen {}: bind: {}", address, std::strerror(err));
    }
    // The kernel's maximum (SOMAXCONN clamps it): every rank of a large node
    // may connect to its agent in the same millisecond.
    if (::listen(fd.get(), SOMAXCONN) != 0) DP_FAIL_ERRNO(DP_ERR_IO, "uds listen {}: listen", address);
    auto listener = std::unique_ptr<Listener>(new Listener());
    listener->fd_ = std::move(fd);
    listener->address_ = address;
    struct stat st {};
    if (address[0] != '@' && stat(address.c_str(), &st) == 0) {
        listener->dev_ = st.st_dev;
        listener->ino_ = st.st_ino;
    }
    DP_LOG_DEBUG("uds: listening on {}", address);
    *out = std::move(listener);
    return DP_OK;
}

Listener::~Listener() {
    // Unlink only the file we bound: another listener may have replaced it.
    struct stat st {};
    if (ino_ != 0 && stat(address_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_)
        unlink(address_.c_str());
}

dp_status_t Listener::accept_fd(int64_t timeout_ns, UniqueFd *out) {
    Deadline deadline(timeout_ns);
    for (;;) {
        UniqueFd conn(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (conn) {
            *out = std::move(conn);
            return DP_OK;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        // Out of descriptors: the caller decides how loudly to say so (the
        // connection stays queued, and the socket readable).
        if (errno == EMFILE || errno == ENFILE) return DP_ERR_TOO_LARGE;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            DP_FAIL_ERRNO(DP_ERR_IO, "uds {}: accept", address_);
        dp_status_t s = sock::wait_fd(fd_.get(), POLLIN, deadline, "uds accept");
        if (s == DP_ERR_TIMEOUT) {
            DP_LOG_DEBUG("uds {}: nobody connected in time", address_);
            return s;
        }
        DP_CHECK(s);
    }
}

dp_status_t Listener::accept(const TransportOptions &options, int64_t timeout_ns,
                             std::unique_ptr<Transport> *out, sock::PeerCredentials *creds) {
    UniqueFd conn;
    DP_CHECK(accept_fd(timeout_ns, &conn));
    sock::PeerCredentials peer;
    DP_CHECK(sock::peer_credentials(conn.get(), &peer));
    if (creds != nullptr) *creds = peer;
    DP_LOG_DEBUG("uds {}: accepted pid {} uid {}", address_, peer.pid, peer.uid);
    return wrap(std::move(conn), address_ + " (pid " + std::to_string(peer.pid) + ")", options,
                out);
}

dp_status_t connect_fd(const std::string &address, int64_t timeout_ns, UniqueFd *out) {
    sockaddr_un sa;
    socklen_t len;
    DP_CHECK(make_address(address, &sa, &len));
    Deadline deadline(timeout_ns);
    int last_error = 0;
    for (;;) {
        // Blocking connect: a Unix socket connect completes or fails at once
        // (EAGAIN only when the backlog is full), unlike TCP.
        UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd) DP_FAIL_ERRNO(DP_ERR_IO, "uds connect {}: socket", address);
        if (::connect(fd.get(), reinterpret_cast<sockaddr *>(&sa), len) == 0) {
            DP_CHECK(sock::set_nonblocking(fd.get(), "uds connect"));
            *out = std::move(fd);
            return DP_OK;
        }
        last_error = errno;
        if (last_error != ENOENT && last_error != ECONNREFUSED && last_error != EAGAIN &&
            last_error != EINTR)
            DP_FAIL(DP_ERR_IO, "uds connect {}: {}", address, std::strerror(last_error));
        int64_t left = deadline.remaining_ns();
        if (left == 0) break;
        std::this_thread::sleep_for(
            std::chrono::nanoseconds(left < 0 || left > kConnectRetryNs ? kConnectRetryNs : left));
    }
    DP_FAIL(DP_ERR_NO_AGENT, "uds connect {}: nobody listens there ({})", address,
            std::strerror(last_error));
}

dp_status_t connect(const std::string &address, const TransportOptions &options, int64_t timeout_ns,
                    std::unique_ptr<Transport> *out) {
    UniqueFd fd;
    DP_CHECK(connect_fd(address, timeout_ns, &fd));
    return wrap(std::move(fd), address, options, out);
}

dp_status_t wrap(UniqueFd fd, const std::string &peer, const TransportOptions &options,
                 std::unique_ptr<Transport> *out) {
    auto t = std::make_unique<StreamTransport>(std::move(fd), "uds", peer, options);
    if (!t->valid()) DP_FAIL(DP_ERR_IO, "uds {}: cannot set up the socket", peer);
    *out = std::move(t);
    return DP_OK;
}

}  // namespace deputy::channel::uds
