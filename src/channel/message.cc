#include "channel/message.h"

#include <fmt/format.h>

#include <iterator>

#include "common/check.h"

namespace deputy::channel {
namespace {

// Indexed by MsgType; grows with the enum.
constexpr const char *kMsgTypeNames[] = {
    "INVALID",      "HELLO",         "DATA",        "END",       "ERROR",
    "KEY_EXCHANGE", "STREAM_HEADER", "KEY_CONFIRM", "SHM_OFFER",
    "ATTACH",       "ATTACHED",      "REGISTER",    "DEREGISTER", "REPLY",
    "STAGED",       "STAGED_RESULT", "INFO_REPLY",  "TEAM_JOIN",  "TEAM_READY",
    "TEAM_LEAVE",   "HEAP_SHARE",    "START",       "TEAM_VIEWS",
    "PROXY_POST",   "PROXY_DONE",    "PROXY_DATA",    "PROXY_FABRIC",
};
static_assert(std::size(kMsgTypeNames) == size_t(MsgType::kCount),
              "every MsgType needs its name in kMsgTypeNames");

}  // namespace

const char *msg_type_name(MsgType type) {
    size_t index = size_t(type);
    return index < std::size(kMsgTypeNames) ? kMsgTypeNames[index] : "UNKNOWN";
}

bool msg_type_valid(uint8_t value) {
    return value != uint8_t(MsgType::kInvalid) && value < uint8_t(MsgType::kCount);
}

dp_status_t check_frame_header(const uint8_t in[kFrameHeaderBytes], size_t max_message,
                               FrameHeader *out, std::string *error) {
    if (in[6] != kFrameMagic0 || in[7] != kFrameMagic1) {
        *error = fmt::format("not a deputy frame (magic bytes {:02x} {:02x}, expected 44 50): the "
                             "peer speaks another protocol or the stream lost its framing",
                             in[6], in[7]);
        return DP_ERR_INVALID;
    }
    if (in[5] != 0) {
        *error = fmt::format("frame flags 0x{:02x} (must be 0)", in[5]);
        return DP_ERR_INVALID;
    }
    if (!msg_type_valid(in[4])) {
        *error = fmt::format("unknown message type {}", unsigned(in[4]));
        return DP_ERR_INVALID;
    }
    const uint32_t length = get_u32(in);
    if (length > max_message) {
        *error = fmt::format("the peer sent a {} message of {} bytes, above the limit of {} bytes",
                             kMsgTypeNames[in[4]], length, max_message);
        return DP_ERR_TOO_LARGE;
    }
    out->length = length;
    out->type = MsgType(in[4]);
    return DP_OK;
}

dp_status_t decode_frame_header(const uint8_t in[kFrameHeaderBytes], size_t max_message,
                                const char *where, FrameHeader *out) {
    std::string error;
    const dp_status_t s = check_frame_header(in, max_message, out, &error);
    if (s != DP_OK) DP_FAIL(s, "{}: {}", where, error);
    return DP_OK;
}

dp_status_t check_send_size(size_t length, size_t max_message, const char *where) {
    if (length > max_message)
        DP_FAIL(DP_ERR_TOO_LARGE,
                "{}: message of {} bytes refused: the channel limit is {} bytes (nothing sent)",
                where, length, max_message);
    return DP_OK;
}

}  // namespace deputy::channel
