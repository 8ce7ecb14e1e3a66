// Staged memory mode for collectives: the host copies its source bytes into
// a bounce buffer in the mapped pool when it posts, the agent runs the
// collective on the bounce buffers (as for dp_malloc memory), and the host
// copies the result out when dp_test/dp_wait first sees the operation done.
// The two host copies are the price that direct access avoids: this is the
// baseline of the published BlueField GVMI-vs-staging comparison, and the
// one mode that needs no access by the agent to the caller's own memory.
#pragma once

#include <deputy/status.h>

#include <cstdint>

#include "client/pool_allocator.h"
#include "coll/collective.h"

namespace deputy::client {

struct StagedCollective {
    void *bounce = nullptr;          // one pool block; nullptr: nothing staged
    uint64_t block_bytes = 0;        // its length
    uint64_t in_offset = 0, in_bytes = 0;  // where the staged source bytes are in it
    uint8_t *user_out = nullptr;     // where the result goes
    const uint8_t *bounce_out = nullptr;
    uint64_t out_bytes = 0;          // 0: this member receives nothing
    bool copied_out = false;
    // alltoallv: only the received blocks go back (rcounts and rdispls of
    // the request's counts block, which the library owns until release),
    // so the bytes between them stay the user's.
    const uint64_t *vector_counts = nullptr;
    uint32_t entries = 0;
    uint64_t elem_bytes = 0;

    bool active() const { return bounce != nullptr; }
};

// Where a member's source and destination bytes sit in one block that holds
// both (a staged bounce block; a team proxy's block): one region when the
// two overlap (in place, their relative position kept), else the source
// then the destination at the next kAlign boundary. in_len and out_len are
// what the post's two pointers must cover: the table's bytes, except that
// both of a bcast member's cover the larger (the agent checks both).
struct BlockLayout {
    uint64_t bytes = 0;  // the block's length; 0: nothing to lay out
    uint64_t in_off = 0, out_off = 0;
    uint64_t in_len = 0, out_len = 0;
};
BlockLayout block_layout(coll::Collective c, const coll::MemberBytes &r, uintptr_t src,
                         uintptr_t dst);
// A vector collective's: the source up to in_len, the destination from the
// next boundary, apart even when empty (the agent refuses one buffer for
// both). bytes = 0 when the sum overflows.
BlockLayout vector_block_layout(uint64_t in_len, uint64_t out_len);
// The bytes from a vector collective's buffers' starts to the ends of
// their farthest blocks (coll/vector_counts.h's counts block of `entries`
// members); false when one overflows.
bool vector_extents(const uint64_t *counts, uint32_t entries, uint64_t elem_bytes,
                    uint64_t *in_len, uint64_t *out_len);

struct StagedPointers {
    const void *src = nullptr;  // what the descriptor carries instead of the user's
    void *dst = nullptr;
};

// Lays out the bounce block (one region when source and destination overlap,
// as in place does; else source then destination), copies the bytes in, and
// fills *staged and *ptrs. DP_ERR_NOMEM names the pool's free bytes when the
// block does not fit. Nothing is allocated for zero bytes.
dp_status_t stage_in(PoolAllocator &pool, coll::Collective c, int rank, int size, const void *src,
                     void *dst, uint64_t count, uint64_t elem_bytes, uint64_t root,
                     StagedCollective *staged, StagedPointers *ptrs);

// alltoallv: the bounce block holds the source up to the end of its
// farthest block, then the destination likewise, at the blocks' own
// displacements; only the blocks are copied in (and out, stage_out).
// `counts` is the request's counts block (coll/vector_counts.h). A block
// whose end overflows 64 bits is not staged: the post goes out with the
// user's pointers and the agent refuses it (DP_ERR_DENIED on every member),
// as it refuses it in the other modes.
dp_status_t stage_in_vector(PoolAllocator &pool, const void *src, void *dst,
                            const uint64_t *counts, uint32_t entries, uint64_t elem_bytes,
                            StagedCollective *staged, StagedPointers *ptrs);

// Copies the result to the user's buffer once (success only).
void stage_out(StagedCollective *staged);
// Returns the bounce block to the pool.
void stage_release(PoolAllocator &pool, StagedCollective *staged);

}  // namespace deputy::client
