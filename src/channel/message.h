// The channel's wire format: one typed enum of control messages with its name
// table (checked by static_assert, NCCL ncclProxyMsgType style) and the 8-byte
// frame header every transport puts in front of a message.
//
// Frame layout (all integers little-endian, whatever the host):
//   bytes 0..3  payload length in bytes (u32), at most the channel's limit
//   byte  4     message type (MsgType)
//   byte  5     flags, 0 (reserved: a non-zero value is refused)
//   bytes 6..7  magic "DP" (0x44 0x50): catches a non-deputy peer or a
//               desynchronised stream at the first frame
//   then        the payload
// The shm ring pads each frame to 8 bytes; sockets do not pad.
#pragma once

#include <deputy/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace deputy::channel {

// Version of the protocol in HELLO, KEY_EXCHANGE and a client's ATTACH; a
// peer with another version is refused at the handshake. 3: HEAP_SHARE;
// 4: TEAM_JOIN and TEAM_READY carry a join id (channel/control.h).
inline constexpr uint16_t kProtocolVersion = 4;

// The per-channel message limit: 1 MiB unless configured (DOCA's comm
// channel stops at 4080 bytes). The ceiling bounds what a configuration may
// ask, because the receiver keeps a buffer of the limit's size.
inline constexpr size_t kDefaultMaxMessage = size_t(1) << 20;
inline constexpr size_t kMaxMessageCeiling = size_t(64) << 20;

inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr uint8_t kFrameMagic0 = 0x44;  // 'D'
inline constexpr uint8_t kFrameMagic1 = 0x50;  // 'P'

// Append only: the values are on the wire. Add a name to kMsgTypeNames in
// message.cc with each new value (the static_assert there fails otherwise).
enum class MsgType : uint8_t {
    kInvalid = 0,       // never sent; a zeroed frame is refused
    kHello = 1,         // handshake: version, limits, message size/count, mode (hello.h)
    kData = 2,          // application payload
    kEnd = 3,           // the sender is done; payload: u64 number of DATA it sent
    kError = 4,         // the peer gives up; payload: a UTF-8 reason
    kKeyExchange = 5,   // secure: version, role, ephemeral X25519 public key (secure.h)
    kStreamHeader = 6,  // secure: the sender's secretstream header
    kKeyConfirm = 7,    // secure: first sealed frame; proves both hold the same key
    kShmOffer = 8,      // shm setup over the Unix socket: segment size and region; memfd attached
    kAttach = 9,        // client -> agent: first message of a control connection (control.h)
    kAttached = 10,     // agent -> client: the client's segment; memfd and doorbell eventfd attached
    kRegister = 11,     // client -> agent: a memory range (or where the segment is mapped)
    kDeregister = 12,   // client -> agent: forget a registered range
    kReply = 13,        // agent -> client: status and reason of a request
    kStaged = 14,       // client -> agent: a mover descriptor with its source bytes
    kStagedResult = 15, // agent -> client: its completion record and destination bytes
    kInfoReply = 16,    // agent -> client: state and counters as JSON text
    kTeamJoin = 17,     // client -> agent: join team `key` as rank r of n (answered when it forms)
    kTeamReady = 18,    // agent -> client: the team of join id j formed (its id) or why not
    kTeamLeave = 19,    // client -> agent: leave a team (answered by REPLY)
    kHeapShare = 20,    // client -> agent: the process's shared heap; its memfd attached (REPLY)
    kStart = 21,        // bench channel: this side's threads are ready; payload: u64 0
    kTeamViews = 22,    // agent -> client: more of a TEAM_READY's fds; payload: u64 join id
    kProxyPost = 23,    // remote member -> its team proxy: a collective and its bytes (control.h)
    kProxyDone = 24,    // team proxy -> remote member: the collective's status and result bytes
    kProxyData = 25,    // either way: more of a PROXY_POST's or PROXY_DONE's bytes
    kProxyFabric = 26,  // remote member -> its team proxy: its RMA endpoint (memory mode rdma)
    kCount              // number of values; keep last
};

// "HELLO", "DATA", ...; "UNKNOWN" for a value outside the enum.
const char *msg_type_name(MsgType type);
// True for the values a peer may send (kInvalid and kCount excluded).
bool msg_type_valid(uint8_t value);

struct FrameHeader {
    uint32_t length = 0;
    MsgType type = MsgType::kInvalid;
};

// Little-endian stores and loads, for headers and message bodies.
inline void put_u16(uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v);
    p[1] = uint8_t(v >> 8);
}
inline void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline uint16_t get_u16(const uint8_t *p) {
    return uint16_t(p[0] | (p[1] << 8));
}
inline uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
inline uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

inline void encode_frame_header(uint8_t out[kFrameHeaderBytes], MsgType type, uint32_t length) {
    put_u32(out, length);
    out[4] = uint8_t(type);
    out[5] = 0;
    out[6] = kFrameMagic0;
    out[7] = kFrameMagic1;
}

// Checks a received header: magic, flags, type, and length <= max_message.
// DP_ERR_INVALID (logged with the bytes' meaning) for a malformed header,
// DP_ERR_TOO_LARGE for a length above the limit. `where` names the transport
// in the log line.
dp_status_t decode_frame_header(const uint8_t in[kFrameHeaderBytes], size_t max_message,
                                const char *where, FrameHeader *out);
// The same checks without logging, the reason in *error: for a peer that
// may be hostile, whose every mistake must not cost a log line.
dp_status_t check_frame_header(const uint8_t in[kFrameHeaderBytes], size_t max_message,
                               FrameHeader *out, std::string *error);

// Refuses a message above the limit before anything is sent: DP_ERR_TOO_LARGE
// and an error naming both sizes.
dp_status_t check_send_size(size_t length, size_t max_message, const char *where);

}  // namespace deputy::channel
