// libFuzzer target for the control protocol (src/channel/control.h) and the
// frame header (src/channel/message.h): the bytes the agent reads from any
// local client. Built by tests/fuzz/CMakeLists.txt, run by scripts/fuzz.sh;
// docs/fuzzing.md says how to reproduce a crash.
//
// One input is looked at two ways:
//   - bytes 0..7 (when there are 8) go to decode_frame_header;
//   - byte 0 picks a control decoder, bytes 1.. are its payload. Byte 0 is
//     the message's MsgType (9 ATTACH .. 15 STAGED_RESULT, 17 TEAM_JOIN ..
//     19 TEAM_LEAVE); other values are folded onto those ten so that no
//     input is wasted.
// The payload is the tail of libFuzzer's buffer, so a decoder reading one
// byte past its length hits ASan's redzone.
//
// Beyond "no crash", each successful decode must survive a round trip:
// encode(decode(x)) == x byte for byte (the encoding is canonical: reserved
// fields are 0, lengths are the real lengths), decode(encode(m)) == m, and
// decoding into a reused message gives the same result as into a fresh one.
// A failed decode must return DP_ERR_INVALID or DP_ERR_TOO_LARGE with an
// error naming the message. Any broken property aborts, so libFuzzer saves
// the input.
//
// `control_fuzz -write_corpus=DIR` writes the seed corpus (valid messages from
// the encoders) to DIR and exits; tests/fuzz/corpus/control was made so.
#include <deputy/log.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "channel/control.h"
#include "channel/message.h"
#include "common/log.h"

namespace {

using namespace deputy::channel;
using namespace deputy::channel::control;

// What the running input is being checked as, for the abort message.
const char *g_checking = "";

[[noreturn]] void fail(const char *what, const char *file, int line) {
    std::fprintf(stderr, "control_fuzz: %s:%d: property broken while checking %s: %s\n", file,
                 line, g_checking, what);
    std::abort();
}
#define REQUIRE(cond)                                     \
    do {                                                  \
        if (!(cond)) fail(#cond, __FILE__, __LINE__);     \
    } while (0)

// Field-by-field equality. Raw structs (dp_desc_t, dp_completion_t) travel as
// bytes, so they compare as bytes.
bool same(const Attach &a, const Attach &b) {
    return a.version == b.version && a.purpose == b.purpose && a.ring_size == b.ring_size &&
           a.pool_bytes == b.pool_bytes && a.proof_addr == b.proof_addr && a.proof == b.proof &&
           a.token == b.token;
}
bool same(const TeamJoin &a, const TeamJoin &b) {
    return a.join_id == b.join_id && a.key == b.key && a.secret == b.secret &&
           a.rank == b.rank && a.size == b.size && a.timeout_ms == b.timeout_ms;
}
bool same(const TeamReady &a, const TeamReady &b) {
    return a.join_id == b.join_id && a.status == b.status && a.team_id == b.team_id &&
           a.reason == b.reason;
}
bool same(const Attached &a, const Attached &b) {
    return a.client_id == b.client_id && a.num_engines == b.num_engines &&
           a.agent_pid == b.agent_pid && a.segment_bytes == b.segment_bytes &&
           a.ring_offset == b.ring_offset && a.ring_size == b.ring_size &&
           a.pool_offset == b.pool_offset && a.pool_bytes == b.pool_bytes &&
           a.max_transfer == b.max_transfer && a.max_staged == b.max_staged;
}
bool same(const Register &a, const Register &b) {
    return a.addr == b.addr && a.len == b.len && a.kind == b.kind;
}
bool same(const Reply &a, const Reply &b) { return a.status == b.status && a.reason == b.reason; }
bool same(const HeapShare &a, const HeapShare &b) { return a.addr == b.addr && a.len == b.len; }
bool same(const std::vector<StagedRange> &a, const std::vector<StagedRange> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].addr != b[i].addr || a[i].bytes != b[i].bytes) return false;
    return true;
}
bool same(const Staged &a, const Staged &b) {
    return std::memcmp(&a.desc, &b.desc, sizeof(a.desc)) == 0 && same(a.sources, b.sources);
}
bool same(const StagedResult &a, const StagedResult &b) {
    return a.status == b.status && std::memcmp(&a.record, &b.record, sizeof(a.record)) == 0 &&
           same(a.writes, b.writes);
}

// DEREGISTER has no struct: wrap it so the round trip below serves all seven.
struct Deregister {
    uint64_t addr = 0;
};
bool same(const Deregister &a, const Deregister &b) { return a.addr == b.addr; }
void encode(const Deregister &m, std::vector<uint8_t> *out) { encode_deregister(m.addr, out); }
dp_status_t decode(const uint8_t *p, size_t n, Deregister *out, std::string *error) {
    return decode_deregister(p, n, &out->addr, error);
}
// TEAM_LEAVE likewise.
struct TeamLeave {
    uint32_t team_id = 0;
};
bool same(const TeamLeave &a, const TeamLeave &b) { return a.team_id == b.team_id; }
void encode(const TeamLeave &m, std::vector<uint8_t> *out) { encode_team_leave(m.team_id, out); }
dp_status_t decode(const uint8_t *p, size_t n, TeamLeave *out, std::string *error) {
    return decode_team_leave(p, n, &out->team_id, error);
}
struct TeamViews {
    uint64_t join_id = 0;
};
bool same(const TeamViews &a, const TeamViews &b) { return a.join_id == b.join_id; }
bool same(const ProxyFabric &a, const ProxyFabric &b) {
    return a.provider == b.provider && a.address == b.address;
}
bool same(const ProxyPost &a, const ProxyPost &b) {
    return a.slot == b.slot && std::memcmp(a.post, b.post, sizeof(a.post)) == 0 &&
           a.block_base == b.block_base && a.block_bytes == b.block_bytes &&
           a.in_offset == b.in_offset && a.in_total == b.in_total && a.in == b.in &&
           a.counts == b.counts && a.memory == b.memory && a.src_base == b.src_base &&
           a.src_key == b.src_key && a.dst_base == b.dst_base && a.dst_key == b.dst_key;
}
bool same(const ProxyData &a, const ProxyData &b) {
    return a.slot == b.slot && a.offset == b.offset && a.bytes == b.bytes;
}
bool same(const ProxyDone &a, const ProxyDone &b) {
    return a.slot == b.slot && a.status == b.status && a.bytes_completed == b.bytes_completed &&
           a.result == b.result && a.value == b.value && a.out_offset == b.out_offset &&
           a.out == b.out;
}
void encode(const TeamViews &m, std::vector<uint8_t> *out) { encode_team_views(m.join_id, out); }
dp_status_t decode(const uint8_t *p, size_t n, TeamViews *out, std::string *error) {
    return decode_team_views(p, n, &out->join_id, error);
}

// A message full of leftovers from an earlier decode, to catch a decoder
// that only writes some fields (an agent may reuse one message object).
template <class M>
M dirty();
template <>
Attach dirty<Attach>() {
    Attach m;
    m.version = 0xbeef;
    m.purpose = Purpose::kInfo;
    m.ring_size = 77;
    m.pool_bytes = 1 << 20;
    m.proof_addr = 0x1234;
    m.proof.fill(0x77);
    m.token = std::string(300, 'x');
    return m;
}
template <>
TeamJoin dirty<TeamJoin>() {
    return TeamJoin{0xfeedface, std::string(200, 'k'), std::string(100, 's'), 9, 10, 11};
}
template <>
TeamReady dirty<TeamReady>() {
    return TeamReady{0xfeedface, DP_ERR_TIMEOUT, 77, std::string(900, 'w')};
}
template <>
TeamLeave dirty<TeamLeave>() {
    return TeamLeave{0xdeadbeef};
}
template <>
TeamViews dirty<TeamViews>() {
    return TeamViews{0xdeadbeefdeadbeefull};
}
template <>
ProxyPost dirty<ProxyPost>() {
    ProxyPost m;
    m.slot = 63;
    std::memset(m.post, 0x5a, sizeof(m.post));
    m.block_base = 0x1000;
    m.block_bytes = 1 << 20;
    m.in_offset = 64;
    m.in_total = 400;
    m.in.assign(300, 0x11);
    m.counts.assign(72, 0x22);
    m.memory = 0x7f;
    m.src_base = m.src_key = m.dst_base = m.dst_key = 0x5555;
    return m;
}
template <>
ProxyFabric dirty<ProxyFabric>() {
    return ProxyFabric{std::string(80, 'p'), std::vector<uint8_t>(600, 0x66)};
}
template <>
ProxyData dirty<ProxyData>() {
    return ProxyData{9, 4096, std::vector<uint8_t>(700, 0x44)};
}
template <>
ProxyDone dirty<ProxyDone>() {
    return ProxyDone{17, 0x81, 4096, 5, 77, 128, std::vector<uint8_t>(500, 0x33)};
}
template <>
Attached dirty<Attached>() {
    Attached m;
    std::memset(&m, 0xa5, sizeof(m));
    return m;
}
template <>
Register dirty<Register>() {
    return Register{0x1000, 0x2000, RegionKind::kSegmentBase};
}
template <>
HeapShare dirty<HeapShare>() {
    return HeapShare{0xdead000, 0xbeef000};
}
template <>
Deregister dirty<Deregister>() {
    return Deregister{0xdead};
}
template <>
Reply dirty<Reply>() {
    return Reply{DP_ERR_DENIED, std::string(2000, 'r')};
}
template <>
Staged dirty<Staged>() {
    Staged m;
    std::memset(&m.desc, 0x5a, sizeof(m.desc));
    m.sources.assign(12, StagedRange{0x4000, std::vector<uint8_t>(64, 0xcc)});
    return m;
}
template <>
StagedResult dirty<StagedResult>() {
    StagedResult m;
    m.status = DP_ERR_IO;
    std::memset(&m.record, 0x3c, sizeof(m.record));
    m.writes.assign(12, StagedRange{0x8000, std::vector<uint8_t>(64, 0xdd)});
    return m;
}

template <class M>
void round_trip(const uint8_t *p, size_t n, const char *name) {
    g_checking = name;
    M m;
    std::string error;
    dp_status_t s = decode(p, n, &m, &error);
    if (s != DP_OK) {
        REQUIRE(s == DP_ERR_INVALID || s == DP_ERR_TOO_LARGE);
        // "ATTACH: field 'purpose' = 7 ...": the message, then what is wrong.
        const size_t len = std::strlen(name);
        REQUIRE(error.size() > len + 2);
        REQUIRE(error.compare(0, len, name) == 0);
        REQUIRE(error[len] == ':');
        return;
    }

    // Encode first: a field the decoder left invalid then shows up inside
    // control.cc (a sanitizer report in the encoder) rather than in same().
    // Encoders append: what was in *out stays in front.
    std::vector<uint8_t> bytes{0x42};
    encode(m, &bytes);
    REQUIRE(bytes.size() >= 1 && bytes[0] == 0x42);
    bytes.erase(bytes.begin());
    // Canonical: an accepted message is exactly what the encoder writes, so
    // a reserved field must be refused unless 0 and no byte goes unread.
    REQUIRE(bytes.size() == n);
    REQUIRE(n == 0 || std::memcmp(bytes.data(), p, n) == 0);

    M again;
    std::string error2;
    REQUIRE(decode(bytes.data(), bytes.size(), &again, &error2) == DP_OK);
    REQUIRE(same(m, again));

    // Reusing a message object must not change the outcome.
    M reused = dirty<M>();
    REQUIRE(decode(p, n, &reused, &error2) == DP_OK);
    REQUIRE(same(m, reused));
}

void frame_header(const uint8_t *in) {
    g_checking = "the frame header";
    FrameHeader h;
    dp_status_t s = decode_frame_header(in, kMaxControlMessage, "fuzz", &h);
    if (s != DP_OK) {
        REQUIRE(s == DP_ERR_INVALID || s == DP_ERR_TOO_LARGE);
        return;
    }
    REQUIRE(msg_type_valid(uint8_t(h.type)));
    REQUIRE(h.length <= kMaxControlMessage);
    REQUIRE(std::strcmp(msg_type_name(h.type), "UNKNOWN") != 0);
    uint8_t out[kFrameHeaderBytes];
    encode_frame_header(out, h.type, h.length);
    REQUIRE(std::memcmp(out, in, kFrameHeaderBytes) == 0);
}

// The messages with a decoder: every one a peer may send on a control
// connection (INFO_REPLY is JSON, read by the JSON parser).
constexpr MsgType kDecoded[] = {
    MsgType::kAttach, MsgType::kAttached,     MsgType::kRegister,
    MsgType::kDeregister, MsgType::kReply,    MsgType::kStaged,
    MsgType::kStagedResult, MsgType::kTeamJoin, MsgType::kTeamReady,
    MsgType::kTeamLeave, MsgType::kHeapShare, MsgType::kTeamViews,
    MsgType::kProxyPost, MsgType::kProxyDone, MsgType::kProxyData,
    MsgType::kProxyFabric,
};

MsgType pick(uint8_t b) {
    for (MsgType t : kDecoded)
        if (uint8_t(t) == b) return t;
    return kDecoded[b % std::size(kDecoded)];
}

// --- seed corpus ---------------------------------------------------------

template <class M>
std::vector<uint8_t> seed(MsgType type, const M &m) {
    std::vector<uint8_t> out{uint8_t(type)};
    encode(m, &out);
    return out;
}

StagedRange range(uint64_t addr, size_t len, uint8_t fill) {
    return StagedRange{addr, std::vector<uint8_t>(len, fill)};
}

int write_corpus(const char *dir) {
    struct Input {
        const char *name;
        std::vector<uint8_t> bytes;
    };
    std::vector<Input> inputs;

    Attach attach;
    attach.ring_size = 256;
    attach.pool_bytes = 64 << 20;
    attach.token = "0123456789abcdef0123456789abcdef";
    inputs.push_back({"attach-token", seed(MsgType::kAttach, attach)});
    Attach info;
    info.purpose = Purpose::kInfo;
    inputs.push_back({"attach-info", seed(MsgType::kAttach, info)});

    Attached attached{7, 2, 4242, 80 << 20, 4096, 256, 1 << 20, 64 << 20, 2 << 20, 1 << 20};
    inputs.push_back({"attached", seed(MsgType::kAttached, attached)});

    inputs.push_back({"register-segment",
                      seed(MsgType::kRegister, Register{0x7f0000000000, 80 << 20,
                                                        RegionKind::kSegmentBase})});
    inputs.push_back({"register-direct",
                      seed(MsgType::kRegister, Register{0x7f1234560000, 1 << 16,
                                                        RegionKind::kDirect})});
    inputs.push_back({"deregister", seed(MsgType::kDeregister, Deregister{0x7f1234560000})});

    inputs.push_back({"reply-ok", seed(MsgType::kReply, Reply{DP_OK, ""})});
    inputs.push_back({"reply-denied",
                      seed(MsgType::kReply,
                           Reply{DP_ERR_DENIED, "register: [0x1000, +4096) is not mapped"})});

    Staged staged;
    staged.desc.opcode = 1;
    staged.desc.completion = 0x7f0000001000;
    staged.desc.src = 0x7f0000010000;
    staged.desc.dst = 0x7f0000020000;
    staged.desc.size = 64;
    staged.desc.user = 99;
    staged.sources.push_back(range(0x7f0000010000, 64, 0xab));
    staged.sources.push_back(range(0x7f0000030000, 16, 0xcd));
    inputs.push_back({"staged-2-ranges", seed(MsgType::kStaged, staged)});
    Staged empty;
    inputs.push_back({"staged-no-range", seed(MsgType::kStaged, empty)});

    StagedResult result;
    result.record.status = 1;
    result.record.bytes_completed = 64;
    result.record.user = 99;
    result.writes.push_back(range(0x7f0000020000, 64, 0xab));
    inputs.push_back({"staged-result", seed(MsgType::kStagedResult, result)});
    StagedResult failed;
    failed.status = DP_ERR_DENIED;
    inputs.push_back({"staged-result-denied", seed(MsgType::kStagedResult, failed)});

    inputs.push_back(
        {"team-join",
         seed(MsgType::kTeamJoin, TeamJoin{7, "job-123-abcd", std::string(64, 'f'), 1, 4, 0})});
    inputs.push_back({"team-ready", seed(MsgType::kTeamReady, TeamReady{7, DP_OK, 3, ""})});
    inputs.push_back({"team-leave", seed(MsgType::kTeamLeave, TeamLeave{3})});
    inputs.push_back({"team-views", seed(MsgType::kTeamViews, TeamViews{7})});
    ProxyPost proxy_post;
    proxy_post.slot = 3;
    proxy_post.post[0] = 0x80;
    proxy_post.block_base = 0x7f0000010000;
    proxy_post.block_bytes = 4096;
    proxy_post.in_total = 2048;
    proxy_post.in.assign(1024, 0x5c);
    inputs.push_back({"proxy-post", seed(MsgType::kProxyPost, proxy_post)});
    ProxyPost remote_post;
    remote_post.slot = 5;
    remote_post.post[0] = 0x81;
    remote_post.memory = kProxyRemoteMemory;
    remote_post.src_base = 0x7f0000020000;
    remote_post.src_key = 0x1234567890abcdef;
    remote_post.dst_key = 0xfedcba0987654321;
    inputs.push_back({"proxy-post-rdma", seed(MsgType::kProxyPost, remote_post)});
    inputs.push_back({"proxy-fabric",
                      seed(MsgType::kProxyFabric,
                           ProxyFabric{"tcp", std::vector<uint8_t>{2, 0, 0x1f, 0x90, 127, 0, 0,
                                                                  1, 0, 0, 0, 0, 0, 0, 0, 0}})});
    inputs.push_back({"proxy-data", seed(MsgType::kProxyData,
                                         ProxyData{3, 1024, std::vector<uint8_t>(1024, 0x5d)})});
    inputs.push_back({"proxy-done", seed(MsgType::kProxyDone,
                                         ProxyDone{3, 0, 1024, 1, 9, 2048,
                                                   std::vector<uint8_t>(1024, 0x6d)})});
    inputs.push_back(
        {"heap-share", seed(MsgType::kHeapShare, HeapShare{0x7f0000000000, 24ull << 30})});
    Attach proven = attach;
    proven.proof_addr = 0x7ffc12345670;
    proven.proof.fill(0x5a);
    inputs.push_back({"attach-proof", seed(MsgType::kAttach, proven)});

    // A valid frame header in bytes 0..7 (byte 0 then also picks a decoder).
    std::vector<uint8_t> frame(kFrameHeaderBytes);
    encode_frame_header(frame.data(), MsgType::kRegister, 24);
    encode(Register{0x7f1234560000, 1 << 16, RegionKind::kDirect}, &frame);
    inputs.push_back({"frame-register", frame});

    for (const Input &s : inputs) {
        std::string path = std::string(dir) + "/" + s.name;
        FILE *f = std::fopen(path.c_str(), "wb");
        if (f == nullptr || std::fwrite(s.bytes.data(), 1, s.bytes.size(), f) != s.bytes.size() ||
            std::fclose(f) != 0) {
            std::perror(path.c_str());
            return 1;
        }
    }
    std::printf("control_fuzz: wrote %zu corpus inputs to %s\n", inputs.size(), dir);
    return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
    constexpr std::string_view flag = "-write_corpus=";
    for (int i = 1; i < *argc; ++i) {
        std::string_view arg = (*argv)[i];
        if (arg.substr(0, flag.size()) == flag) std::exit(write_corpus((*argv)[i] + flag.size()));
    }
    // decode_frame_header logs every refused header at error level: millions
    // of lines, and slow. The properties are checked, not read from the log.
    deputy::log::set_sdk_level(DP_LOG_DISABLE);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= kFrameHeaderBytes) frame_header(data);
    if (size == 0) return 0;
    const uint8_t *p = data + 1;
    const size_t n = size - 1;
    switch (pick(data[0])) {
        case MsgType::kAttach: round_trip<Attach>(p, n, "ATTACH"); break;
        case MsgType::kAttached: round_trip<Attached>(p, n, "ATTACHED"); break;
        case MsgType::kRegister: round_trip<Register>(p, n, "REGISTER"); break;
        case MsgType::kDeregister: round_trip<Deregister>(p, n, "DEREGISTER"); break;
        case MsgType::kReply: round_trip<Reply>(p, n, "REPLY"); break;
        case MsgType::kStaged: round_trip<Staged>(p, n, "STAGED"); break;
        case MsgType::kStagedResult: round_trip<StagedResult>(p, n, "STAGED_RESULT"); break;
        case MsgType::kTeamJoin: round_trip<TeamJoin>(p, n, "TEAM_JOIN"); break;
        case MsgType::kTeamReady: round_trip<TeamReady>(p, n, "TEAM_READY"); break;
        case MsgType::kTeamLeave: round_trip<TeamLeave>(p, n, "TEAM_LEAVE"); break;
        case MsgType::kHeapShare: round_trip<HeapShare>(p, n, "HEAP_SHARE"); break;
        case MsgType::kTeamViews: round_trip<TeamViews>(p, n, "TEAM_VIEWS"); break;
        case MsgType::kProxyPost: round_trip<ProxyPost>(p, n, "PROXY_POST"); break;
        case MsgType::kProxyDone: round_trip<ProxyDone>(p, n, "PROXY_DONE"); break;
        case MsgType::kProxyData: round_trip<ProxyData>(p, n, "PROXY_DATA"); break;
        case MsgType::kProxyFabric: round_trip<ProxyFabric>(p, n, "PROXY_FABRIC"); break;
        default: fail("pick() returned a non-control type", __FILE__, __LINE__);
    }
    return 0;
}
