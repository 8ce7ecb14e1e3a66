// What one side of `deputy bench channel` measured and counted. Filled by
// the session, printed and serialised by the report; with --loopback the
// spawned peer sends its own back to the parent as JSON.
#pragma once

#include <deputy/status.h>

#include <cstdint>
#include <string>

namespace deputy::bench::channel {

// Exit codes of the command (documented in docs/channel.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // setup, transport, timeout, handshake, peer error
inline constexpr int kExitMismatch = 2;  // the run finished but counts or bytes differ

struct Latency {  // one-way = round trip / 2, nanoseconds, warm-up excluded
    uint64_t samples = 0;
    double min = 0, p50 = 0, avg = 0, p99 = 0, max = 0;
};

struct SideResult {
    std::string role;       // "listen" or "connect"
    std::string transport;  // "shm", "secure+tcp", ...
    std::string peer;
    uint64_t buffer_bytes = 0;
    uint64_t max_message = 0;
    bool connected = false;

    uint64_t msg_size = 0;       // bytes this side sends per message
    uint64_t peer_msg_size = 0;  // from the peer's HELLO
    uint64_t planned_send = 0;   // messages this side meant to send
    uint64_t sent = 0;           // messages sent successfully
    uint64_t expected = 0;       // messages this side expected to receive
    uint64_t received = 0;       // messages received successfully
    uint64_t dropped = 0;        // stream: the peer's messages read beyond this side's -n
    int64_t peer_planned = -1;   // the peer's -n (HELLO), -1 if no HELLO came
    int64_t peer_sent = -1;      // the count in the peer's END, -1 if no END came
    uint64_t wrong = 0;          // received messages whose size or bytes were wrong

    uint64_t send_start_ns = 0, send_end_ns = 0;  // CLOCK_MONOTONIC
    uint64_t recv_start_ns = 0, recv_first_ns = 0, recv_end_ns = 0;
    uint64_t send_cpu_ns = 0, recv_cpu_ns = 0;  // CPU time of the threads
    Latency latency;                            // pingpong initiator only

    dp_status_t status = DP_OK;  // the first error, DP_OK if none
    std::string error;           // what went wrong, for humans
    std::string verdict;         // "OK", or which counts differ

    int exit_code() const {
        if (status != DP_OK) return kExitError;
        return verdict == "OK" ? kExitOk : kExitMismatch;
    }
};

}  // namespace deputy::bench::channel
