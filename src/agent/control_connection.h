// A client's control connection as the agent's service thread drives it:
// non-blocking in both directions. Bytes that arrive are gathered into
// frames (channel/message.h) as they come; answers are queued and sent as
// the client reads them. The service thread never waits on one client: a
// client that trickles a frame or does not read its answers is found by the
// timestamps below and dropped by the agent, while the others are served.
#pragma once

#include <deputy/status.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "channel/message.h"
#include "common/fd.h"

namespace deputy::agent {

class ControlConnection {
  public:
    struct Frame {
        channel::MsgType type = channel::MsgType::kInvalid;
        std::vector<uint8_t> payload;
        UniqueFd fd;  // one fd the client attached to the frame's first byte, if any
    };

    ControlConnection() = default;
    // Takes the accepted socket and makes it non-blocking.
    explicit ControlConnection(UniqueFd socket);

    int fd() const { return socket_.get(); }

    // Reads what the socket holds now, at most `budget` bytes (so one
    // flooding client cannot keep the service thread), and appends every
    // complete frame to *frames. DP_ERR_AGENT_LOST when the client closed
    // the connection, DP_ERR_INVALID (with *error) for a frame the protocol
    // refuses: bad header, payload above max_payload, more than one fd or an
    // fd that is not on a frame's first byte. Which frames may carry an fd
    // is the caller's to check (Frame::fd).
    dp_status_t receive(size_t max_payload, size_t budget, std::deque<Frame> *frames,
                        std::string *error);
    // When the first byte of a frame not yet complete arrived (0: none).
    uint64_t partial_since_ns() const { return partial_since_ns_; }

    // Queues one message, fds attached to its first byte (they are
    // duplicated and held until sent), and sends what the socket takes now.
    // An error means the connection is broken.
    dp_status_t send(channel::MsgType type, const std::vector<uint8_t> &payload,
                     const int *fds = nullptr, size_t nfds = 0);
    // Sends what is queued as far as the socket takes it.
    dp_status_t flush();
    bool has_output() const { return !out_.empty(); }
    size_t queued_bytes() const { return queued_bytes_; }
    // When the oldest answer still (partly) queued was queued (0: none).
    uint64_t blocked_since_ns() const { return out_.empty() ? 0 : out_.front().queued_ns; }

    // Hands the socket over (blocking again), for a service that speaks its
    // own protocol on it. Queued output must have been flushed.
    UniqueFd release();

  private:
    struct Outgoing {
        std::vector<uint8_t> bytes;  // frame header + payload
        size_t sent = 0;
        std::vector<UniqueFd> fds;  // sent with the first byte
        uint64_t queued_ns = 0;
    };

    UniqueFd socket_;
    uint8_t header_[channel::kFrameHeaderBytes] = {};
    size_t header_got_ = 0;
    bool have_header_ = false;
    Frame current_;
    size_t payload_expected_ = 0;
    uint64_t partial_since_ns_ = 0;
    std::deque<Outgoing> out_;
    size_t queued_bytes_ = 0;
};

}  // namespace deputy::agent
