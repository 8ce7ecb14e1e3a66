// Framing over a connected stream socket: the transport behind uds and tcp.
// Frames are the 8-byte header of message.h plus the payload, unpadded. The
// socket is non-blocking: a call first tries the syscall and only polls when
// the kernel has nothing, so a busy stream costs one syscall per send (writev
// of header and payload) and at most one per receive (reads are buffered:
// one read() can bring in many small frames).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "channel/transport.h"
#include "common/fd.h"

namespace deputy::channel {

class StreamTransport final : public Transport {
  public:
    // Takes a connected SOCK_STREAM socket; `kind` and `peer` are for logs.
    // Check valid() afterwards: construction fails only if the socket cannot
    // be made non-blocking.
    StreamTransport(UniqueFd fd, std::string kind, std::string peer,
                    const TransportOptions &options);
    ~StreamTransport() override;

    bool valid() const { return fd_.valid(); }
    int fd() const { return fd_.get(); }

    dp_status_t send(MsgType type, const void *payload, size_t length, int64_t timeout_ns) override;
    dp_status_t recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                     int64_t timeout_ns) override;
    size_t max_message() const override { return max_message_; }
    void shutdown() override;
    std::string kind() const override { return kind_; }
    std::string peer() const override { return peer_; }
    size_t buffer_bytes() const override { return buffer_bytes_; }

  private:
    // Makes at least `want` bytes available in the receive buffer.
    dp_status_t fill(size_t want, const Deadline &deadline, bool mid_message);
    // Reads exactly `length` bytes straight into dst (large payloads).
    dp_status_t read_direct(uint8_t *dst, size_t length, const Deadline &deadline);
    dp_status_t closed_status(bool mid_message, const char *what);
    dp_status_t break_channel(dp_status_t status);

    UniqueFd fd_;
    std::string kind_;
    std::string peer_;
    size_t max_message_;
    size_t buffer_bytes_ = 0;
    std::atomic<bool> shut_down_{false};
    std::atomic<bool> peer_closed_{false};  // a receive saw EOF or a reset
    // Set once the framing is lost; every later call returns it.
    std::atomic<int> broken_{DP_OK};

    // Receive side only (one receiving thread).
    std::vector<uint8_t> rbuf_;
    size_t rpos_ = 0;
    size_t rend_ = 0;
};

}  // namespace deputy::channel
