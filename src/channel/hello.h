// HELLO: the first message each side sends on a channel, before any DATA.
// Both sides send theirs at once and read the other's, so neither waits for
// the other to speak first. It says what this side will do (message size and
// count, mode) and what it accepts (its message limit); the application
// decides what a difference means (the bench reports it; the agent refuses).
//
// Payload (24 bytes, little-endian):
//   u16 protocol version | u8 mode | u8 flags | u32 max message accepted |
//   u64 message size | u64 message count
#pragma once

#include <string>

#include "channel/transport.h"

namespace deputy::channel {

struct Hello {
    uint16_t version = kProtocolVersion;
    uint8_t mode = 0;   // application-defined (the bench: 0 stream, 1 pingpong)
    uint8_t flags = 0;  // application-defined (the bench: bit 0 one-way)
    uint32_t max_message = 0;
    uint64_t msg_size = 0;
    uint64_t num_msgs = 0;
};

inline constexpr size_t kHelloBytes = 24;

void encode_hello(const Hello &hello, uint8_t out[kHelloBytes]);
// DP_ERR_INVALID if `length` is not kHelloBytes.
dp_status_t decode_hello(const uint8_t *in, size_t length, Hello *out);

// Sends `mine`, then receives the peer's within the timeout. Errors, each
// logged with what the peer did instead:
//   DP_ERR_DENIED   the peer started a secure session and this side did not
//   DP_ERR_MISMATCH the peer speaks another protocol version
//   DP_ERR_INVALID  the peer sent something other than HELLO
//   DP_ERR_AGENT_LOST with *peer_error set: the peer sent ERROR (its reason)
dp_status_t exchange_hello(Transport &transport, const Hello &mine, int64_t timeout_ns,
                           Hello *theirs, std::string *peer_error = nullptr);

// END's payload: the number of DATA messages the sender sent.
inline constexpr size_t kEndBytes = 8;

}  // namespace deputy::channel
