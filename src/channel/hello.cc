#include "channel/hello.h"

#include <vector>

#include "common/check.h"

namespace deputy::channel {

void encode_hello(const Hello &hello, uint8_t out[kHelloBytes]) {
    put_u16(out, hello.version);
    out[2] = hello.mode;
    out[3] = hello.flags;
    put_u32(out + 4, hello.max_message);
    put_u64(out + 8, hello.msg_size);
    put_u64(out + 16, hello.num_msgs);
}

dp_status_t decode_hello(const uint8_t *in, size_t length, Hello *out) {
    if (length != kHelloBytes)
        DP_FAIL(DP_ERR_INVALID, "HELLO of {} bytes (expected {})", length, kHelloBytes);
    out->version = get_u16(in);
    out->mode = in[2];
    out->flags = in[3];
    out->max_message = get_u32(in + 4);
    out->msg_size = get_u64(in + 8);
    out->num_msgs = get_u64(in + 16);
    return DP_OK;
}

dp_status_t exchange_hello(Transport &transport, const Hello &mine, int64_t timeout_ns,
                           Hello *theirs, std::string *peer_error) {
    Deadline deadline(timeout_ns);
    uint8_t out[kHelloBytes];
    encode_hello(mine, out);
    DP_CHECK(transport.send(MsgType::kHello, out, sizeof(out), deadline.remaining_ns()));
    // Big enough for any reply the peer may legitimately send first
    // (HELLO, ERROR with its reason, or KEY_EXCHANGE).
    std::vector<uint8_t> in(std::min<size_t>(transport.max_message(), 4096));
    MsgType type;
    size_t length = 0;
    dp_status_t s = transport.recv(&type, in.data(), in.size(), &length, deadline.remaining_ns());
    if (s == DP_ERR_TIMEOUT) DP_FAIL(s, "handshake: no HELLO from the peer in time");
    DP_CHECK(s);
    switch (type) {
        case MsgType::kHello:
            break;
        case MsgType::kKeyExchange:
            DP_FAIL(DP_ERR_DENIED,
                    "handshake: the peer runs a secure session (it sent "
                    "KEY_EXCHANGE) and this side does not: use --secure on both ends");
        case MsgType::kError: {
            std::string reason(reinterpret_cast<const char *>(in.data()), length);
            if (peer_error) *peer_error = reason;
            DP_FAIL(DP_ERR_AGENT_LOST, "handshake: the peer gave up: {}", reason);
        }
        default:
            DP_FAIL(DP_ERR_INVALID, "handshake: expected HELLO, the peer sent {}",
                    msg_type_name(type));
    }
    DP_CHECK(decode_hello(in.data(), length, theirs));
    if (theirs->version != kProtocolVersion)
        DP_FAIL(DP_ERR_MISMATCH, "handshake: the peer speaks protocol version {}, this side {}",
                theirs->version, kProtocolVersion);
    return DP_OK;
}

}  // namespace deputy::channel
