#include "agent/control_connection.h"

#include <deputy/coll.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sodium.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "channel/socket_io.h"
#include "common/timing.h"

namespace deputy::agent {
namespace {

// A client sends at most one fd (its shared heap's memfd, on HEAP_SHARE); a
// few more slots let us receive (and close) what a hostile one attaches
// instead of having the kernel drop them silently.
constexpr size_t kFdSlots = 4;
// The agent sends at most a team's board and its members' views.
constexpr size_t kSendFdSlots = channel::sock::kMaxFdsPerMessage;

}  // namespace

ControlConnection::ControlConnection(UniqueFd socket) : socket_(std::move(socket)) {
    const int flags = fcntl(socket_.get(), F_GETFL);
    if (flags >= 0) fcntl(socket_.get(), F_SETFL, flags | O_NONBLOCK);
}

dp_status_t ControlConnection::receive(size_t max_payload, size_t budget, std::deque<Frame> *frames,
                                       std::string *error) {
    uint8_t chunk[64 << 10];
    size_t taken = 0;
    while (taken < budget) {
        // Never read past the frame in progress: the next frame's bytes stay
        // in the kernel until this one is handled (simple, and it bounds
        // what a client can make us buffer to one frame).
        size_t want = have_header_ ? payload_expected_ - current_.payload.size()
                                   : sizeof(header_) - header_got_;
        want = std::min({want, sizeof(chunk), budget - taken});
        uint8_t *into = have_header_ ? chunk : header_ + header_got_;
        iovec iov{into, want};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdSlots)];
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        const ssize_t n = want ? recvmsg(socket_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) : 0;
        if (want && n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return DP_OK;
            *error = fmt::format("recvmsg: {}", std::strerror(errno));
            return channel::sock::status_from_errno(errno);
        }
        // Received fds are owned (and closed) here before anything else is
        // decided, whatever the client attached.
        UniqueFd received[kFdSlots];
        size_t nreceived = 0;
        bool extra = false;
        for (cmsghdr *c = CMSG_FIRSTHDR(&msg); want && c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; ++i) {
                int fd;
                std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (nreceived < kFdSlots) received[nreceived++] = UniqueFd(fd);
                else ::close(fd), extra = true;
            }
        }
        if (extra || nreceived > 1 || (msg.msg_flags & MSG_CTRUNC)) {
            *error = "the client attached more than one file descriptor to a control message";
            return DP_ERR_INVALID;
        }
        if (nreceived == 1) {
            if (have_header_ || header_got_ != 0 || current_.fd) {
                *error = "the client attached a file descriptor inside a control message";
                return DP_ERR_INVALID;
            }
            current_.fd = std::move(received[0]);
        }
        if (want && n == 0) {
            *error = "closed its connection";
            return DP_ERR_AGENT_LOST;
        }
        taken += size_t(n);
        if (n > 0 && partial_since_ns_ == 0) partial_since_ns_ = timing::now_ns();
        if (!have_header_) {
            header_got_ += size_t(n);
            if (header_got_ < sizeof(header_)) continue;
            channel::FrameHeader h;
            const dp_status_t s = channel::check_frame_header(header_, max_payload, &h, error);
            if (s != DP_OK) return DP_ERR_INVALID;
            have_header_ = true;
            current_.type = h.type;
            current_.payload.clear();
            payload_expected_ = h.length;
            // A join carries the job's secret: one buffer, never moved by a
            // reallocation that would leave a copy behind in freed memory.
            if (h.type == channel::MsgType::kTeamJoin) current_.payload.reserve(h.length);
        } else {
            // Grows with what really arrived: a header announcing 4 MiB costs
            // nothing until the bytes are there.
            current_.payload.insert(current_.payload.end(), chunk, chunk + n);
            if (current_.type == channel::MsgType::kTeamJoin) sodium_memzero(chunk, size_t(n));
        }
        if (current_.payload.size() == payload_expected_) {
            frames->push_back(std::move(current_));
            current_ = {};
            have_header_ = false;
            header_got_ = 0;
            payload_expected_ = 0;
            partial_since_ns_ = 0;
        }
    }
    return DP_OK;
}

dp_status_t ControlConnection::send(channel::MsgType type, const std::vector<uint8_t> &payload,
                                    const int *fds, size_t nfds) {
    Outgoing o;
    o.bytes.resize(channel::kFrameHeaderBytes + payload.size());
    channel::encode_frame_header(o.bytes.data(), type, uint32_t(payload.size()));
    if (!payload.empty())
        std::memcpy(o.bytes.data() + channel::kFrameHeaderBytes, payload.data(), payload.size());
    if (nfds > kSendFdSlots) return DP_ERR_INVALID;
    for (size_t i = 0; i < nfds; ++i) {
        o.fds.emplace_back(fcntl(fds[i], F_DUPFD_CLOEXEC, 0));
        if (!o.fds.back()) return errno == EMFILE || errno == ENFILE ? DP_ERR_TOO_LARGE : DP_ERR_IO;
    }
    o.queued_ns = timing::now_ns();
    queued_bytes_ += o.bytes.size();
    out_.push_back(std::move(o));
    return flush();
}

dp_status_t ControlConnection::flush() {
    while (!out_.empty()) {
        Outgoing &o = out_.front();
        iovec iov{o.bytes.data() + o.sent, o.bytes.size() - o.sent};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kSendFdSlots)] = {};
        if (o.sent == 0 && !o.fds.empty()) {
            msg.msg_control = control;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * o.fds.size());
            cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * o.fds.size());
            for (size_t i = 0; i < o.fds.size(); ++i) {
                const int fd = o.fds[i].get();
                std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
            }
        }
        const ssize_t n = sendmsg(socket_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return DP_OK;
            return channel::sock::status_from_errno(errno);
        }
        if (o.sent == 0) o.fds.clear();  // the kernel holds its own copies now
        o.sent += size_t(n);
        queued_bytes_ -= size_t(n);
        if (o.sent == o.bytes.size()) out_.pop_front();
    }
    return DP_OK;
}

UniqueFd ControlConnection::release() {
    const int flags = fcntl(socket_.get(), F_GETFL);
    if (flags >= 0) fcntl(socket_.get(), F_SETFL, flags & ~O_NONBLOCK);
    return std::move(socket_);
}

}  // namespace deputy::agent
