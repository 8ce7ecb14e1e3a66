// The control protocol between a client (src/client) and its agent
// (src/agent): the messages of the Unix-socket control connection, their
// encodings, and framed send/receive with fds attached. Defined once here so
// that agent and client, which never include each other, speak the same bytes.
//
// A connection starts with ATTACH (the client's purpose, token and wishes).
// The agent checks the peer (SO_PEERCRED uid, token) and answers:
//   - purpose attach: ATTACHED with the client's segment (memfd) and the
//     doorbell eventfd attached (SCM_RIGHTS), or REPLY with an error status;
//   - purpose info: INFO_REPLY (JSON) and closes;
//   - purpose service: REPLY, then the connection belongs to the service.
// Then requests (REGISTER, DEREGISTER, HEAP_SHARE, STAGED, TEAM_LEAVE) each get one
// answer (REPLY or STAGED_RESULT), in order. TEAM_JOIN is answered by
// TEAM_READY when its team forms (or cannot), in any order and between those
// answers: it carries a join id the client chose, which TEAM_READY echoes,
// so that a client may have several joins waiting at once (its threads,
// client/control_channel.h). Mover descriptors do not travel here: they go
// through the ring in the segment. Closing the socket detaches.
//
// Every decoder is written for hostile input: it checks lengths before
// reading, names the offending field in *error, and never trusts a count.
// The agent runs every client byte through these functions (fuzzed by
// tests/fuzz/control_fuzz.cc).
#pragma once

#include <deputy/coll.h>
#include <deputy/mover.h>
#include <deputy/p2p.h>
#include <deputy/status.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "channel/message.h"
#include "common/fd.h"

namespace deputy::channel::control {

// Control messages are small except STAGED/STAGED_RESULT, which carry data.
inline constexpr size_t kMaxControlMessage = (size_t(4) << 20) + 4096;
inline constexpr size_t kMaxTokenBytes = 256;
inline constexpr size_t kMaxReasonBytes = 1024;
inline constexpr uint32_t kMaxStagedRanges = 8;

// kService: the connection is handed to a service the agent's host program
// installed (Agent::set_service_handler), which speaks its own messages on
// it from then on; the benchmark's channel peer is one.
// kTeamProxy (remote clients only): the connection is handed to a team
// proxy (proxy/team_proxy.h), a member of the team on the agent's host
// that stands in for the remote one; TEAM_JOIN, then PROXY_POST and
// PROXY_DONE, travel on it.
enum class Purpose : uint8_t { kAttach = 0, kInfo = 1, kService = 2, kTeamProxy = 3 };

inline constexpr size_t kIdentityProofBytes = 32;

struct Attach {
    uint16_t version = kProtocolVersion;
    Purpose purpose = Purpose::kAttach;
    uint32_t ring_size = 0;   // descriptors in the client's ring; 0 = agent default
    uint64_t pool_bytes = 0;  // mapped pool; 0 = agent default
    // Random bytes the client keeps at proof_addr in its own memory until
    // ATTACHED: an agent that could only look up the client's pid (no
    // SO_PEERPIDFD) reads them back to prove the pid still is the client.
    uint64_t proof_addr = 0;
    std::array<uint8_t, kIdentityProofBytes> proof{};
    std::string token;        // per-job token; empty when none
};

// Where things are in the client's segment, as offsets (the two processes map
// it at different addresses).
struct Attached {
    uint32_t client_id = 0;
    uint32_t num_engines = 0;
    uint64_t agent_pid = 0;
    uint64_t segment_bytes = 0;
    uint64_t ring_offset = 0;
    uint32_t ring_size = 0;
    uint64_t pool_offset = 0;
    uint64_t pool_bytes = 0;
    uint64_t max_transfer = 0;     // bytes per descriptor (mapped and direct)
    uint64_t max_staged = 0;       // bytes per staged descriptor
};

enum class RegionKind : uint32_t {
    kSegmentBase = 0,  // "my mapping of the segment starts at addr" (len = segment bytes)
    kDirect = 1,       // a range of ordinary memory the agent may read and write
};

struct Register {
    uint64_t addr = 0;
    uint64_t len = 0;
    RegionKind kind = RegionKind::kDirect;
};

// The client's shared heap (client/shared_heap.h): where it maps the memfd
// attached to the message, and its size (the memfd's, sealed).
struct HeapShare {
    uint64_t addr = 0;
    uint64_t len = 0;
};

struct Reply {
    dp_status_t status = DP_OK;
    std::string reason;  // empty on success
};

// A byte range of the client's memory with its contents (staged mode).
struct StagedRange {
    uint64_t addr = 0;
    std::vector<uint8_t> bytes;
};

struct Staged {
    dp_desc_t desc{};
    std::vector<StagedRange> sources;  // every range the descriptor reads
};

struct StagedResult {
    dp_status_t status = DP_OK;  // DP_OK: `record` and `writes` are the outcome
    dp_completion_t record{};
    std::vector<StagedRange> writes;  // every range the descriptor wrote
};

// A remote member's collective, sent to its team proxy: the post as it
// would go into a ring, whose src, dst and counts are addresses in the
// member's own staged bounce block and pool, with the bytes the proxy
// needs: the block's source part (in_total bytes at in_offset in the
// block) and a vector collective's counts block. The proxy lays out a
// block of its own of block_bytes and moves every address of the post
// into it. `in` holds the first of the source bytes; the rest follow at
// once, in order, in PROXY_DATA messages (at most kProxyChunkBytes each).
// A proxy link's request slots: a team's collective slots first
// (DP_TEAM_MAX_OUTSTANDING), then its point-to-point ones.
inline constexpr uint32_t kProxySlots = DP_TEAM_MAX_OUTSTANDING + DP_P2P_MAX_OUTSTANDING;

inline constexpr uint8_t kProxyStagedMemory = 0;  // the bytes travel in the link
inline constexpr uint8_t kProxyRemoteMemory = 1;  // the proxy reads and writes them by RMA

struct ProxyPost {
    uint32_t slot = 0;  // the member's request slot (< kProxySlots): its PROXY_DONE names it
    // A channel::CollPost (coll_post.h) or P2pPost (p2p_post.h), as in a
    // ring slot; a point-to-point post's buf is the block (its message, or
    // its receive buffer).
    uint8_t post[64] = {};
    uint64_t block_base = 0;   // the member's bounce block; 0: none (nothing moves)
    uint64_t block_bytes = 0;
    uint64_t in_offset = 0;
    uint64_t in_total = 0;     // >= in.size(); in_offset + in_total <= block_bytes
    std::vector<uint8_t> in;
    std::vector<uint8_t> counts;  // empty unless the collective is a vector one
    // Memory mode rdma (kProxyRemoteMemory): no block and no bytes come
    // (block_base, block_bytes, in_offset and in_total are 0); the post's
    // buffers are the member's own, exposed to the proxy's RMA link
    // (PROXY_FABRIC): the bytes the post reads under src_key (the remote
    // address of its byte 0: src_base), the bytes it writes under dst_key
    // (dst_base). The proxy reads and writes them there itself.
    uint8_t memory = kProxyStagedMemory;
    uint64_t src_base = 0, src_key = 0, dst_base = 0, dst_key = 0;
};

// The bytes of one message of a collective's source or result: more than
// one message carries at most this many (a relay's message is at most
// kMaxControlMessage, and smaller pieces let the two ends' ciphers work
// on different pieces at once).
inline constexpr uint64_t kProxyChunkBytes = 1 << 20;

// More of a PROXY_POST's source bytes (member to proxy, right after it) or
// of a result (proxy to member, right before its PROXY_DONE): `bytes` at
// `offset` in the slot's block.
struct ProxyData {
    uint32_t slot = 0;
    uint64_t offset = 0;
    std::vector<uint8_t> bytes;
};

// The proxy's answer: the record's status and bytes_completed, and the
// last of the block's destination part (`out`, at out_offset in the
// member's block; the rest came before it in PROXY_DATA messages).
struct ProxyDone {
    uint32_t slot = 0;
    uint8_t status = 0;  // a completion record's status (DP_COMP_*, channel::kColl*)
    uint64_t bytes_completed = 0;
    uint32_t result = 0;  // the record's result and value (a message's source and tag)
    uint64_t value = 0;
    uint64_t out_offset = 0;
    std::vector<uint8_t> out;
};

// A remote member in memory mode rdma, right after its TEAM_READY: the
// libfabric provider and the address of the endpoint its memory is exposed
// on (fabric/exposed_memory.h). The proxy answers REPLY: DP_OK once its RMA
// link to that address is open, else the status and why.
inline constexpr size_t kMaxProviderName = 64;
inline constexpr size_t kMaxFabricAddress = 512;

struct ProxyFabric {
    std::string provider;          // "tcp", "verbs", "efa": letters, digits, '_', ';'
    std::vector<uint8_t> address;  // fi_getname's bytes
};

// TeamJoin::flags. kJoinAgentRuns: this member leaves every operation to
// the agent (DEPUTY_RANK_EXECUTION=off), so no member may run one (the
// board needs every member's posts): the team gets no board, and nobody its
// 2 x size views.
inline constexpr uint32_t kJoinAgentRuns = 1;
inline constexpr uint32_t kJoinFlags = kJoinAgentRuns;

struct TeamJoin {
    uint64_t join_id = 0;  // the client's; its TEAM_READY carries it back
    std::string key;     // at most kMaxTokenBytes
    std::string secret;  // the job's secret (1..kMaxTokenBytes): joining needs it
    uint32_t rank = 0;
    uint32_t size = 0;
    uint32_t timeout_ms = 0;
    uint32_t flags = 0;  // kJoin*
};

// Where a member's pool is, for its teammates' read-only view of it
// (channel/team_board.h): the segment's size, the pool's offset and length
// in it, and the address the member itself sees the pool at; and where its
// shared heap is (include/deputy/heap.h: the ordinary buffers of a program
// under libdeputy-mpi), if it shared one: the address the member sees it
// at and its length, the whole of its file.
struct PoolView {
    uint64_t member_base = 0;
    uint64_t segment_bytes = 0;
    uint64_t pool_offset = 0;
    uint64_t pool_bytes = 0;
    uint64_t heap_base = 0;
    uint64_t heap_bytes = 0;  // 0: no heap view
};

struct TeamReady {
    TeamReady() = default;
    TeamReady(uint64_t join, dp_status_t st, uint32_t team, std::string why)
        : join_id(join), status(st), team_id(team), reason(std::move(why)) {}
    uint64_t join_id = 0;  // the TEAM_JOIN's this answers
    dp_status_t status = DP_OK;
    uint32_t team_id = 0;
    std::string reason;
    // A team whose waiting ranks may run its operations (team_board.h): the
    // board's size, then one view per rank. The fds travel with the message
    // (ready_fds() of them): the board first, then each rank's segment,
    // read-only, in rank order, then the heap of each rank whose view has
    // one, in rank order. Those past sock::kMaxFdsPerMessage follow in
    // TEAM_VIEWS messages right after it, each naming the join id.
    uint64_t board_bytes = 0;  // 0: no board
    std::vector<PoolView> pools;
};

// The fds a TEAM_READY brings, its own and its TEAM_VIEWS' together.
size_t ready_fds(const TeamReady &m);

// Encoders append the payload (no frame header) to *out.
void encode(const Attach &m, std::vector<uint8_t> *out);
void encode(const Attached &m, std::vector<uint8_t> *out);
void encode(const Register &m, std::vector<uint8_t> *out);
void encode_deregister(uint64_t addr, std::vector<uint8_t> *out);
void encode(const HeapShare &m, std::vector<uint8_t> *out);
void encode(const Reply &m, std::vector<uint8_t> *out);
void encode(const Staged &m, std::vector<uint8_t> *out);
void encode(const StagedResult &m, std::vector<uint8_t> *out);
void encode(const TeamJoin &m, std::vector<uint8_t> *out);
void encode(const TeamReady &m, std::vector<uint8_t> *out);
void encode_team_leave(uint32_t team_id, std::vector<uint8_t> *out);
void encode_team_views(uint64_t join_id, std::vector<uint8_t> *out);
void encode(const ProxyPost &m, std::vector<uint8_t> *out);
void encode(const ProxyDone &m, std::vector<uint8_t> *out);
void encode(const ProxyData &m, std::vector<uint8_t> *out);
void encode(const ProxyFabric &m, std::vector<uint8_t> *out);

// Decoders: DP_OK, or DP_ERR_INVALID (DP_ERR_TOO_LARGE for a limit) with
// *error naming the field. Nothing is logged here: the caller decides
// whether a bad message is the peer's fault (agent) or a bug (client).
dp_status_t decode(const uint8_t *p, size_t n, Attach *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, Attached *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, Register *out, std::string *error);
dp_status_t decode_deregister(const uint8_t *p, size_t n, uint64_t *addr, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, HeapShare *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, Reply *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, Staged *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, StagedResult *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, TeamJoin *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, TeamReady *out, std::string *error);
dp_status_t decode_team_leave(const uint8_t *p, size_t n, uint32_t *team_id, std::string *error);
dp_status_t decode_team_views(const uint8_t *p, size_t n, uint64_t *join_id, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, ProxyPost *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, ProxyDone *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, ProxyData *out, std::string *error);
dp_status_t decode(const uint8_t *p, size_t n, ProxyFabric *out, std::string *error);

// One framed message on a raw Unix stream socket, fds attached to its first
// byte. Bounded by timeout_ns (<0: forever).
dp_status_t send_message(int fd, MsgType type, const std::vector<uint8_t> &payload,
                         const int *fds, size_t nfds, int64_t timeout_ns, const char *where);

// Receives one framed message of at most max_payload bytes with up to
// max_fds fds. On DP_ERR_TIMEOUT before the first byte nothing was consumed.
dp_status_t recv_message(int fd, size_t max_payload, MsgType *type, std::vector<uint8_t> *payload,
                         UniqueFd *fds, size_t max_fds, size_t *nfds, int64_t timeout_ns,
                         const char *where);

}  // namespace deputy::channel::control
