#include "channel/stream_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "channel/socket_io.h"
#include "common/check.h"

namespace deputy::channel {
namespace {

// Big enough that one read() brings in hundreds of small frames; payloads
// larger than half of it bypass it.
constexpr size_t kReadBufferBytes = 64 * 1024;

}  // namespace

StreamTransport::StreamTransport(UniqueFd fd, std::string kind, std::string peer,
                                 const TransportOptions &options)
    : fd_(std::move(fd)),
      kind_(std::move(kind)),
      peer_(std::move(peer)),
      max_message_(options.max_message),
      rbuf_(kReadBufferBytes) {
    if (sock::set_nonblocking(fd_.get(), kind_.c_str()) != DP_OK) {
        fd_.reset();
        return;
    }
    buffer_bytes_ = sock::set_buffer_sizes(fd_.get(), options.buffer_bytes, kind_.c_str());
}

StreamTransport::~StreamTransport() {
    shutdown();
}

void StreamTransport::shutdown() {
    // shutdown(2), not close: it wakes a thread blocked in poll() on this fd
    // (close would not, and the fd number could be reused under it) and the
    // peer reads EOF at once.
    if (!shut_down_.exchange(true) && fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

dp_status_t StreamTransport::break_channel(dp_status_t status) {
    int expected = DP_OK;
    broken_.compare_exchange_strong(expected, DP_ERR_IO);
    return status;
}

dp_status_t StreamTransport::closed_status(bool mid_message, const char *what) {
    // The contract has no half-open channel: once the peer is gone for one
    // direction, sends fail too (TCP would otherwise accept them silently).
    peer_closed_.store(true, std::memory_order_relaxed);
    if (shut_down_.load()) {
        DP_LOG_DEBUG("{} {}: {} after local shutdown", kind_, peer_, what);
        return DP_ERR_AGENT_LOST;
    }
    if (mid_message) {
        break_channel(DP_ERR_AGENT_LOST);
        DP_FAIL(DP_ERR_AGENT_LOST,
                "{} {}: the peer closed the connection in the middle of a "
                "message",
                kind_, peer_);
    }
    DP_LOG_DEBUG("{} {}: the peer closed the connection", kind_, peer_);
    return DP_ERR_AGENT_LOST;
}

dp_status_t StreamTransport::send(MsgType type, const void *payload, size_t length,
                                  int64_t timeout_ns) {
    if (int b = broken_.load(std::memory_order_relaxed); b != DP_OK) return dp_status_t(b);
    DP_CHECK(check_send_size(length, max_message_, kind_.c_str()));
    if (shut_down_.load(std::memory_order_relaxed) || peer_closed_.load(std::memory_order_relaxed))
        return closed_status(false, "send");
    uint8_t header[kFrameHeaderBytes];
    encode_frame_header(header, type, uint32_t(length));
    iovec iov[2] = {{header, sizeof(header)}, {const_cast<void *>(payload), length}};
    const size_t total = sizeof(header) + length;
    size_t sent = 0;
    Deadline deadline(timeout_ns);
    while (sent < total) {
        // Skip what already went out; sendmsg (not writev) for MSG_NOSIGNAL:
        // a dead peer must be an error code, not SIGPIPE killing the process.
        iovec rest[2];
        int count = 0;
        size_t skip = sent;
        for (const iovec &v : iov) {
            if (skip >= v.iov_len) {
                skip -= v.iov_len;
                continue;
            }
            rest[count].iov_base = static_cast<char *>(v.iov_base) + skip;
            rest[count].iov_len = v.iov_len - skip;
            skip = 0;
            ++count;
        }
        msghdr msg{};
        msg.msg_iov = rest;
        msg.msg_iovlen = size_t(count);
        ssize_t n = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
        if (n > 0) {
            sent += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            dp_status_t s = sock::wait_fd(fd_.get(), POLLOUT, deadline, kind_.c_str());
            if (s == DP_ERR_TIMEOUT) {
                if (sent == 0) {
                    DP_LOG_DEBUG("{} {}: send timed out (peer not reading)", kind_, peer_);
                    return s;
                }
                break_channel(s);
                DP_FAIL(s, "{} {}: send timed out after {} of {} bytes; the channel is broken",
                        kind_, peer_, sent, total);
            }
            if (s != DP_OK) return break_channel(s);
            continue;
        }
        int err = n < 0 ? errno : EPIPE;
        if (sock::status_from_errno(err) == DP_ERR_AGENT_LOST)
            return closed_status(sent > 0, "send");
        break_channel(DP_ERR_IO);
        DP_FAIL(DP_ERR_IO, "{} {}: send: {}", kind_, peer_, std::strerror(err));
    }
    return DP_OK;
}

dp_status_t StreamTransport::fill(size_t want, const Deadline &deadline, bool mid_message) {
    if (rpos_ == rend_) rpos_ = rend_ = 0;
    if (rbuf_.size() - rpos_ < want) {
        std::memmove(rbuf_.data(), rbuf_.data() + rpos_, rend_ - rpos_);
        rend_ -= rpos_;
        rpos_ = 0;
    }
    while (rend_ - rpos_ < want) {
        ssize_t n = ::recv(fd_.get(), rbuf_.data() + rend_, rbuf_.size() - rend_, 0);
        if (n > 0) {
            rend_ += size_t(n);
            continue;
        }
        if (n == 0) return closed_status(mid_message || rend_ > rpos_, "receive");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (shut_down_.load(std::memory_order_relaxed)) return closed_status(false, "receive");
            dp_status_t s = sock::wait_fd(fd_.get(), POLLIN, deadline, kind_.c_str());
            if (s == DP_ERR_TIMEOUT && (mid_message || rend_ > rpos_)) {
                break_channel(s);
                DP_FAIL(s, "{} {}: timed out in the middle of a message; the channel is broken",
                        kind_, peer_);
            }
            if (s != DP_OK) return s;
            continue;
        }
        int err = errno;
        if (sock::status_from_errno(err) == DP_ERR_AGENT_LOST)
            return closed_status(mid_message || rend_ > rpos_, "receive");
        break_channel(DP_ERR_IO);
        DP_FAIL(DP_ERR_IO, "{} {}: recv: {}", kind_, peer_, std::strerror(err));
    }
    return DP_OK;
}

dp_status_t StreamTransport::read_direct(uint8_t *dst, size_t length, const Deadline &deadline) {
    size_t got = 0;
    while (got < length) {
        ssize_t n = ::recv(fd_.get(), dst + got, length - got, 0);
        if (n > 0) {
            got += size_t(n);
            continue;
        }
        if (n == 0) return closed_status(true, "receive");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            dp_status_t s = sock::wait_fd(fd_.get(), POLLIN, deadline, kind_.c_str());
            if (s == DP_ERR_TIMEOUT) {
                break_channel(s);
                DP_FAIL(s, "{} {}: timed out in the middle of a message; the channel is broken",
                        kind_, peer_);
            }
            if (s != DP_OK) return s;
            continue;
        }
        int err = errno;
        if (sock::status_from_errno(err) == DP_ERR_AGENT_LOST)
            return closed_status(true, "receive");
        break_channel(DP_ERR_IO);
        DP_FAIL(DP_ERR_IO, "{} {}: recv: {}", kind_, peer_, std::strerror(err));
    }
    return DP_OK;
}

dp_status_t StreamTransport::recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                                  int64_t timeout_ns) {
    if (int b = broken_.load(std::memory_order_relaxed); b != DP_OK) return dp_status_t(b);
    Deadline deadline(timeout_ns);
    if (rend_ - rpos_ < kFrameHeaderBytes) DP_CHECK(fill(kFrameHeaderBytes, deadline, false));
    FrameHeader h;
    dp_status_t s = decode_frame_header(rbuf_.data() + rpos_, max_message_, kind_.c_str(), &h);
    if (s != DP_OK) return break_channel(s);
    if (h.length > capacity) {
        break_channel(DP_ERR_TOO_LARGE);
        DP_FAIL(DP_ERR_TOO_LARGE, "{} {}: a {}-byte message does not fit the {}-byte buffer given",
                kind_, peer_, h.length, capacity);
    }
    rpos_ += kFrameHeaderBytes;
    uint8_t *dst = static_cast<uint8_t *>(buffer);
    size_t have = std::min<size_t>(rend_ - rpos_, h.length);
    if (have > 0) std::memcpy(dst, rbuf_.data() + rpos_, have);
    rpos_ += have;
    size_t rest = h.length - have;
    if (rest > rbuf_.size() / 2) {
        DP_CHECK(read_direct(dst + have, rest, deadline));
    } else if (rest > 0) {
        DP_CHECK(fill(rest, deadline, true));
        std::memcpy(dst + have, rbuf_.data() + rpos_, rest);
        rpos_ += rest;
    }
    *type = h.type;
    *length = h.length;
    return DP_OK;
}

}  // namespace deputy::channel
