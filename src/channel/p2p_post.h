// How a point-to-point message travels from a member to the agent: one
// 64-byte record in the member's ring, as a collective's post does
// (channel/coll_post.h), with an opcode of its own range: a send, a
// receive, or a probe (which asks the agent whether a receive would find a
// message, and is answered in its record).
//
// The agent copies the slot out once and decodes that copy; every field is
// checked there (p2p_post_invalid: opcode, peer, tag, length, reserved
// bytes; the team and the buffer against the member's own teams and memory).
//
// The answer is the post's completion record: its status (the mover's, or
// coll_post.h's kColl* and kP2p*), bytes_completed the message's length,
// and for a receive or a probe `result` the sender's rank and `value` the
// tag.
#pragma once

#include <deputy/mover.h>
#include <deputy/p2p.h>

#include <cstddef>
#include <cstdint>

#include "channel/coll_post.h"

namespace deputy::channel {

enum P2pOpcode : uint8_t {
    kP2pSend = 0xC0,
    kP2pRecv = 0xC1,
    kP2pProbe = 0xC2,
};
inline bool is_p2p_post(uint8_t opcode) { return opcode >= kP2pSend && opcode <= kP2pProbe; }
static_assert(kCollPostBase + coll::kCollectiveCount <= kP2pSend,
              "point-to-point opcodes lie above every collective's");

// P2pPost::flags.
enum P2pFlags : uint8_t {
    // A send that completes only once a receive took it (MPI_Ssend): never
    // held early by the agent.
    kP2pSynchronous = 1,
};

struct P2pPost {
    uint8_t opcode;        // P2pOpcode
    uint8_t flags;         // P2pFlags (sends); 0 otherwise
    uint8_t reserved0[2];  // 0
    uint32_t team;         // the team's id, as the agent gave it at join
    uint64_t completion;   // the member's completion record (its pool)
    uint64_t buf;          // send: the source; receive: the destination; probe: 0
    uint64_t bytes;        // send: the message's length; receive: the buffer's; probe: 0
    int32_t peer;          // send: the destination rank; receive, probe: the source or DP_ANY_SOURCE
    int32_t tag;           // send: 0..DP_TAG_MAX; receive, probe: that or DP_ANY_TAG
    uint64_t sequence;     // the member's count of its point-to-point posts on the team (logs)
    // Its card on the team's board (channel/team_board.h), 0 for none: a
    // send's card number on its pair's ring; a receive's request slot + 1.
    uint64_t card;
    uint64_t reserved1;  // 0
};
static_assert(sizeof(P2pPost) == sizeof(dp_desc_t), "a post fills one ring slot");
static_assert(offsetof(P2pPost, opcode) == offsetof(dp_desc_t, opcode),
              "the routing byte is where a descriptor's opcode is");

const char *p2p_opcode_name(uint8_t opcode);  // "send", "recv", "probe", "unknown"

// A completion status for fields out of range in a post; 0 if fine. Its
// buffer is checked against the member's memory by the agent.
uint8_t p2p_post_invalid(const P2pPost &p, uint32_t team_size);

// Whether a receive (or probe) of (source, tag) takes a message from
// `sender` with `tag`.
inline bool p2p_accepts(const P2pPost &recv, uint32_t sender, int32_t tag) {
    return (recv.peer == DP_ANY_SOURCE || uint32_t(recv.peer) == sender) &&
           (recv.tag == DP_ANY_TAG || recv.tag == tag);
}

}  // namespace deputy::channel
