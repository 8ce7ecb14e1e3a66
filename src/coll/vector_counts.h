// The counts block of a vector collective (alltoallv): what one member
// sends to and receives from each peer. The client writes it into its own
// mapped pool when it posts; the post (channel/coll_post.h) carries its
// address and length; the agent copies it once when the post arrives and
// from then on reads only its copy, which it decodes and checks here.
//
// Why a block in the pool rather than the post or more ring slots: the
// four arrays of a 64-member team are 2 KiB, the post is 64 bytes, and
// ring slots are the mover's descriptors: spreading a post over 32 slots
// would make every ring consumer know about continuation slots and let one
// post straddle the ring's wrap. The pool is memory the agent maps anyway
// (the completion records live there), so reading the block is one bounds
// check and one memcpy, with no system call on the service thread; the
// client frees it with the request.
//
// Layout (native byte order, like the rest of the segment): four arrays of
// `entries` uint64_t, counts and displacements in elements of the post's
// dtype, entries = the team size:
//   scounts[entries] sdispls[entries] rcounts[entries] rdispls[entries]
// Block m of the source is [sdispls[m], +scounts[m]) elements from src and
// goes to member m; block r of the destination is [rdispls[r], +rcounts[r])
// from dst and comes from member r.
#pragma once

#include <deputy/status.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "coll/collective.h"

namespace deputy::coll {

inline constexpr uint32_t kVectorArrays = 4;
constexpr uint64_t vector_counts_bytes(uint32_t entries) {
    return uint64_t(entries) * kVectorArrays * sizeof(uint64_t);
}

// Client side: the API's four arrays into `block` (vector_counts_bytes()).
void encode_vector_counts(uint32_t entries, const size_t *scounts, const size_t *sdispls,
                          const size_t *rcounts, const size_t *rdispls, uint64_t *block);

// One block of a member's buffer, in bytes from its start. A block of 0
// bytes has offset 0, whatever displacement the member gave.
struct VectorBlock {
    uint64_t offset = 0, bytes = 0;
    uint64_t end() const { return offset + bytes; }
    friend bool operator==(const VectorBlock &, const VectorBlock &) = default;
};

// One member's blocks, decoded and checked: send[m] is read from its
// source for member m, recv[r] is written in its destination by member r.
struct MemberVector {
    std::vector<VectorBlock> send, recv;
    uint64_t send_total = 0, recv_total = 0;  // bytes in all
};

// The agent's copy of a block as byte ranges. DP_OK, or with *why naming
// the array and entry:
//   DP_ERR_INVALID    `bytes` is not the length of `team_size` entries, or
//                     element_bytes is 0;
//   DP_ERR_DENIED     a count times element_bytes, or displacement + count
//                     in bytes, overflows 64 bits: no member owns such a
//                     range (the agent's answer to any range outside the
//                     member's memory);
//   DP_ERR_TOO_LARGE  the member would send or receive more than
//                     max_bytes in all.
// `block` may be unaligned (a fuzzer's bytes).
dp_status_t decode_vector_counts(const void *block, uint64_t bytes, uint32_t team_size,
                                 uint64_t element_bytes, uint64_t max_bytes, MemberVector *out,
                                 std::string *why);

// reduce_scatterv's layout (coll/collective.h): the send blocks back to
// back from 0 in rank order, every receive block at 0 with one length.
// Empty when `v` has it, else what differs.
std::string reduction_layout_problem(const MemberVector &v);
// A digest of the blocks a reduce_scatterv's layout gives (the send
// lengths): equal on every node whose members agree, which the agents
// compare before their first step.
uint64_t reduction_layout_digest(const MemberVector &v);

// One member's block as collective `c` reads it, by whoever runs it (the
// agent, the members themselves): decode_vector_counts(), and for a
// reducing vector collective the layout its plans read
// (reduction_layout_problem(); DP_ERR_INVALID when it differs).
dp_status_t decode_collective_counts(Collective c, const void *block, uint64_t bytes,
                                     uint32_t team_size, uint64_t element_bytes,
                                     uint64_t max_bytes, MemberVector *out, std::string *why);

// Whether the members agree: rank r's send to m has the bytes of m's recv
// from r, for every pair whose both members are given (members[r] null:
// not here). Empty when they agree, else the first pair that does not.
std::string vector_difference(std::span<const MemberVector *const> members);

}  // namespace deputy::coll
