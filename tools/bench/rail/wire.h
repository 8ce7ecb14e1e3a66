// Out-of-band control messages between client and server. One typed enum
// with its name table beside it; every payload is a JSON object (small,
// self-describing, and a missing field is an error naming it).
//
//   client                      server
//   HELLO  (workload, rails) -->
//                           <-- READY  (server rails, signal mode)   or ERROR
//   GO     (client polling)  -->
//                           <-- PROGRESS ... (live numbers, a few per second)
//                           <-- RESULT (the measurement)              or ERROR
//   VERDICT (verification)   -->
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace deputy::rail {

enum class MsgType : uint16_t {
    kHello = 1,
    kReady = 2,
    kGo = 3,
    kProgress = 4,
    kResult = 5,
    kVerdict = 6,
    kError = 7,
};
inline constexpr std::array<const char *, 8> kMsgNames = {
    "?", "HELLO", "READY", "GO", "PROGRESS", "RESULT", "VERDICT", "ERROR"};
static_assert(kMsgNames.size() == size_t(MsgType::kError) + 1,
              "kMsgNames must name every MsgType");

const char *msg_name(MsgType type);
bool msg_type_valid(uint16_t raw);

inline constexpr uint32_t kWireMagic = 0x4450524C;  // "DPRL"
inline constexpr uint32_t kWireVersion = 2;
inline constexpr uint32_t kMaxFrame = 16u << 20;

struct Frame {
    MsgType type = MsgType::kError;
    nlohmann::json body;
};

// Bytes <-> lowercase hex, for endpoint addresses inside JSON.
std::string to_hex(const std::vector<uint8_t> &bytes);
// Throws RailError naming `field` on a malformed string.
std::vector<uint8_t> from_hex(const std::string &text, const char *field);

// Reads body[key] as T; throws RailError "<msg>: field 'key' is missing or
// not a <type>" instead of nlohmann's generic message.
template <typename T>
T field(const nlohmann::json &body, const char *msg, const char *key);

}  // namespace deputy::rail
