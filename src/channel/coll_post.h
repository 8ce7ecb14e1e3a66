// How a collective travels from a member to the agent: one 64-byte record
// in the member's ring, where a mover descriptor would be (the ring's slots
// hold 64 bytes whatever they carry). Its first byte sits where a
// descriptor's opcode does, and is 0x80 or above, which no mover opcode is:
// the agent routes it to its team engine and never to the mover.
//
// The agent copies the slot out once and decodes this copy; every field is
// checked there (the collective, dtype and op by the table in
// coll/collective.h; the team against the member's own teams; the buffers
// against its memory).
//
// alltoallv's per-peer counts and displacements do not fit: the member
// writes them into a block in its own pool (coll/vector_counts.h says why
// there) and the post carries the block's address and length, with count
// 0. The agent copies the block once, when the post arrives.
#pragma once

#include <deputy/mover.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "coll/collective.h"

namespace deputy::channel {

// opcode = kCollPostBase + the collective's number (coll::Collective).
inline constexpr uint8_t kCollPostBase = 0x80;
inline bool is_coll_post(uint8_t opcode) { return opcode >= kCollPostBase; }

struct CollPost {
    uint8_t opcode;       // kCollPostBase + collective
    uint8_t dtype;        // dp_dtype_t (reducing collectives; element size for the others)
    uint8_t redop;        // dp_op_t (reducing collectives)
    uint8_t reserved0;    // 0
    uint32_t team;        // the team's id, as the agent gave it at join
    uint64_t completion;  // the member's completion record (its pool or a registered range)
    uint64_t src;         // the member's buffers (bcast: both the one buffer)
    uint64_t dst;
    uint64_t count;       // elements
    uint32_t root;        // bcast
    uint32_t counts_bytes;  // alltoallv: its counts block's length; 0 otherwise
    uint64_t sequence;    // the member's posting order on the team (diagnostics)
    uint64_t counts;      // alltoallv: its counts block, in its pool; 0 otherwise
};
static_assert(sizeof(CollPost) == sizeof(dp_desc_t), "a post fills one ring slot");
static_assert(offsetof(CollPost, opcode) == offsetof(dp_desc_t, opcode),
              "the routing byte is where a descriptor's opcode is");

// Completion statuses of collective records, beside the mover's
// DP_COMP_SUCCESS (which collectives share) and its refusals
// (DP_COMP_INVALID_*, DP_COMP_ADDRESS_DENIED); the client maps them all to
// dp_status_t (client/team.cc).
enum CollStatus : uint8_t {
    kCollMismatch = 0x80,    // the members disagree (operation, count, dtype, op, root)
    kCollMemberLost = 0x81,  // a member of the team left or died
    kCollQueueFull = 0x82,   // the member's queue at the agent was full: post again later
    // Point-to-point records (channel/p2p_post.h) share the mapping.
    kP2pTruncated = 0x83,    // the message is longer than the receive's buffer: nothing written
};
const char *coll_status_name(uint8_t status);  // "mismatch", ...; else the mover's name

// The collective a post names (a byte a client chose: checked).
std::optional<coll::Collective> collective_of(const CollPost &p);
const char *collective_name_of(const CollPost &p);
// How two members' posts differ (empty: they agree), for kCollMismatch.
std::string head_difference(const CollPost &a, const CollPost &b);
// A completion status for fields out of range in agreed posts; 0 if fine.
// A vector collective's counts block and count are checked per member by
// the agent: here only that the others carry none.
inline constexpr uint64_t kMaxCollBytes = 1ull << 36;
uint8_t head_invalid(const CollPost &h, uint32_t team_size);

}  // namespace deputy::channel
