#include "client/staged_collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/log.h"

namespace deputy::client {
namespace {

constexpr uint64_t round_up(uint64_t v) {
    return (v + PoolAllocator::kAlign - 1) / PoolAllocator::kAlign * PoolAllocator::kAlign;
}

}  // namespace

BlockLayout block_layout(coll::Collective c, const coll::MemberBytes &r, uintptr_t s,
                         uintptr_t d) {
    BlockLayout l;
    if (r.source == 0 && r.destination == 0) return l;
    // The descriptor still names both buffers even where one is unused (a
    // bcast member's side): the agent checks them, so both point inside the
    // block.
    const bool bcast = c == coll::Collective::bcast;
    l.in_len = std::max<uint64_t>(r.source, bcast ? r.destination : 0);
    l.out_len = std::max<uint64_t>(r.destination, bcast ? r.source : 0);
    if (s < d + l.out_len && d < s + l.in_len) {  // in place
        const uintptr_t lo = std::min(s, d);
        l.bytes = std::max(s + l.in_len, d + l.out_len) - lo;
        l.in_off = s - lo;
        l.out_off = d - lo;
    } else {
        l.in_off = 0;
        l.out_off = round_up(l.in_len);
        l.bytes = l.out_off + l.out_len;
    }
    return l;
}

BlockLayout vector_block_layout(uint64_t in_len, uint64_t out_len) {
    BlockLayout l;
    l.in_len = in_len;
    l.out_len = out_len;
    l.out_off = round_up(std::max<uint64_t>(in_len, 1));
    if (l.out_off < in_len || __builtin_add_overflow(l.out_off, out_len, &l.bytes)) l.bytes = 0;
    return l;
}

dp_status_t stage_in(PoolAllocator &pool, coll::Collective c, int rank, int size, const void *src,
                     void *dst, uint64_t count, uint64_t elem_bytes, uint64_t root,
                     StagedCollective *staged, StagedPointers *ptrs) {
    *staged = {};
    ptrs->src = src;
    ptrs->dst = dst;
    // The bytes a member reads and the bytes it receives, from the one table.
    const coll::MemberBytes r =
        coll::member_bytes(c, count, elem_bytes, uint32_t(size), uint32_t(rank), uint32_t(root));
    const BlockLayout l = block_layout(c, r, reinterpret_cast<uintptr_t>(src),
                                       reinterpret_cast<uintptr_t>(dst));
    if (l.bytes == 0) return DP_OK;
    const uint64_t bytes = l.bytes, in_off = l.in_off, out_off = l.out_off;
    void *block = pool.allocate(bytes);
    if (!block)
        DP_FAIL(DP_ERR_NOMEM,
                "deputy {} (staged memory): no {}-byte bounce buffer in the mapped pool ({} bytes "
                "free); raise dp_config_t.pool_bytes or the agent's pool_bytes",
                coll::collective_name(c), bytes, pool.free_bytes());
    auto *base = static_cast<uint8_t *>(block);
    if (r.source) std::memcpy(base + in_off, src, r.source);
    staged->bounce = block;
    staged->block_bytes = bytes;
    staged->in_offset = in_off;
    staged->in_bytes = r.source;
    staged->user_out = static_cast<uint8_t *>(dst);
    staged->bounce_out = base + out_off;
    staged->out_bytes = r.destination;
    ptrs->src = base + in_off;
    ptrs->dst = base + out_off;
    return DP_OK;
}

namespace {

// The bytes from the buffer's start to the end of its farthest block of
// one side of a counts block (0: scounts/sdispls, 1: rcounts/rdispls);
// false when one overflows.
bool vector_extent(const uint64_t *counts, uint32_t entries, int side, uint64_t elem,
                   uint64_t *extent) {
    *extent = 0;
    const uint64_t *c = counts + uint64_t(2 * side) * entries;
    const uint64_t *d = c + entries;
    for (uint32_t i = 0; i < entries; ++i) {
        if (c[i] == 0) continue;
        uint64_t end;
        if (__builtin_add_overflow(c[i], d[i], &end) || __builtin_mul_overflow(end, elem, &end))
            return false;
        *extent = std::max(*extent, end);
    }
    return true;
}

}  // namespace

bool vector_extents(const uint64_t *counts, uint32_t entries, uint64_t elem_bytes,
                    uint64_t *in_len, uint64_t *out_len) {
    return vector_extent(counts, entries, 0, elem_bytes, in_len) &&
           vector_extent(counts, entries, 1, elem_bytes, out_len);
}

dp_status_t stage_in_vector(PoolAllocator &pool, const void *src, void *dst,
                            const uint64_t *counts, uint32_t entries, uint64_t elem_bytes,
                            StagedCollective *staged, StagedPointers *ptrs) {
    *staged = {};
    ptrs->src = src;
    ptrs->dst = dst;
    uint64_t in_len, out_len;
    if (!vector_extents(counts, entries, elem_bytes, &in_len, &out_len))
        return DP_OK;  // the agent refuses it
    if (in_len == 0 && out_len == 0) return DP_OK;
    const BlockLayout l = vector_block_layout(in_len, out_len);
    const uint64_t out_off = l.out_off, bytes = l.bytes;
    void *block = bytes ? pool.allocate(bytes) : nullptr;
    if (!block)
        DP_FAIL(DP_ERR_NOMEM,
                "deputy vector collective (staged memory): no bounce buffer for {} source and {} "
                "destination bytes in the mapped pool ({} bytes free); raise "
                "dp_config_t.pool_bytes or the agent's pool_bytes",
                in_len, out_len, pool.free_bytes());
    auto *base = static_cast<uint8_t *>(block);
    const uint64_t *scounts = counts, *sdispls = counts + entries;
    for (uint32_t i = 0; i < entries; ++i)
        if (scounts[i])
            std::memcpy(base + sdispls[i] * elem_bytes,
                        static_cast<const uint8_t *>(src) + sdispls[i] * elem_bytes,
                        scounts[i] * elem_bytes);
    staged->bounce = block;
    staged->block_bytes = bytes;
    staged->in_bytes = in_len;
    staged->user_out = static_cast<uint8_t *>(dst);
    staged->bounce_out = base + out_off;
    staged->out_bytes = out_len;
    staged->vector_counts = counts;
    staged->entries = entries;
    staged->elem_bytes = elem_bytes;
    ptrs->src = base;
    ptrs->dst = base + out_off;
    return DP_OK;
}

void stage_out(StagedCollective *staged) {
    if (!staged->active() || staged->copied_out) return;
    staged->copied_out = true;
    if (staged->vector_counts) {
        const uint32_t p = staged->entries;
        const uint64_t *rcounts = staged->vector_counts + 2 * uint64_t(p), *rdispls = rcounts + p;
        for (uint32_t i = 0; i < p; ++i)
            if (rcounts[i])
                std::memcpy(staged->user_out + rdispls[i] * staged->elem_bytes,
                            staged->bounce_out + rdispls[i] * staged->elem_bytes,
                            rcounts[i] * staged->elem_bytes);
        return;
    }
    if (staged->out_bytes) std::memcpy(staged->user_out, staged->bounce_out, staged->out_bytes);
}

void stage_release(PoolAllocator &pool, StagedCollective *staged) {
    if (staged->bounce) pool.release(staged->bounce);
    *staged = {};
}

}  // namespace deputy::client
