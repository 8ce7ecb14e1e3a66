#include "coll/vector_counts.h"

#include <fmt/format.h>

#include <cstring>

#include "common/fnv.h"

namespace deputy::coll {
namespace {

constexpr const char *kArrayNames[kVectorArrays] = {"scounts", "sdispls", "rcounts", "rdispls"};

uint64_t entry(const uint8_t *block, uint32_t array, uint32_t entries, uint32_t i) {
    uint64_t v;
    std::memcpy(&v, block + (uint64_t(array) * entries + i) * sizeof(uint64_t), sizeof v);
    return v;
}

// One block (count and displacement in elements) as bytes; false when a
// product or the end overflows.
bool to_bytes(uint64_t count, uint64_t displ, uint64_t element, VectorBlock *out) {
    if (count == 0) return *out = {}, true;
    uint64_t bytes, offset, end;
    if (__builtin_mul_overflow(count, element, &bytes) ||
        __builtin_mul_overflow(displ, element, &offset) ||
        __builtin_add_overflow(offset, bytes, &end))
        return false;
    *out = {offset, bytes};
    return true;
}

}  // namespace

void encode_vector_counts(uint32_t entries, const size_t *scounts, const size_t *sdispls,
                          const size_t *rcounts, const size_t *rdispls, uint64_t *block) {
    const size_t *arrays[kVectorArrays] = {scounts, sdispls, rcounts, rdispls};
    for (uint32_t a = 0; a < kVectorArrays; ++a)
        for (uint32_t i = 0; i < entries; ++i) block[uint64_t(a) * entries + i] = arrays[a][i];
}

dp_status_t decode_vector_counts(const void *block, uint64_t bytes, uint32_t team_size,
                                 uint64_t element_bytes, uint64_t max_bytes, MemberVector *out,
                                 std::string *why) {
    out->send.clear();
    out->recv.clear();
    out->send_total = out->recv_total = 0;
    if (team_size == 0 || bytes != vector_counts_bytes(team_size)) {
        *why = fmt::format(
            "counts block of {} bytes; a team of {} needs {} (4 arrays of {} "
            "64-bit entries)",
            bytes, team_size, vector_counts_bytes(team_size), team_size);
        return DP_ERR_INVALID;
    }
    if (element_bytes == 0) {
        *why = "no element size";
        return DP_ERR_INVALID;
    }
    const auto *b = static_cast<const uint8_t *>(block);
    out->send.resize(team_size);
    out->recv.resize(team_size);
    for (uint32_t side = 0; side < 2; ++side) {
        const uint32_t counts = side * 2, displs = side * 2 + 1;
        std::vector<VectorBlock> &blocks = side == 0 ? out->send : out->recv;
        uint64_t &total = side == 0 ? out->send_total : out->recv_total;
        for (uint32_t i = 0; i < team_size; ++i) {
            const uint64_t count = entry(b, counts, team_size, i);
            const uint64_t displ = entry(b, displs, team_size, i);
            if (!to_bytes(count, displ, element_bytes, &blocks[i])) {
                *why = fmt::format(
                    "{}[{}] = {} and {}[{}] = {} of {}-byte elements reach past "
                    "2^64 bytes",
                    kArrayNames[counts], i, count, kArrayNames[displs], i, displ, element_bytes);
                return DP_ERR_DENIED;
            }
            // total <= max_bytes here, so the test cannot wrap.
            if (blocks[i].bytes > max_bytes - total) {
                *why = fmt::format("more than {} bytes to {} in all (the limit), {} by {}[{}]",
                                   max_bytes, side == 0 ? "send" : "receive", blocks[i].bytes,
                                   kArrayNames[counts], i);
                return DP_ERR_TOO_LARGE;
            }
            total += blocks[i].bytes;
        }
    }
    return DP_OK;
}

std::string reduction_layout_problem(const MemberVector &v) {
    uint64_t at = 0;
    for (size_t m = 0; m < v.send.size(); ++m) {
        if (v.send[m].bytes && v.send[m].offset != at)
            return fmt::format("block {} of the source starts at byte {}, not {} (the blocks lie "
                               "back to back from the start)",
                               m, v.send[m].offset, at);
        at += v.send[m].bytes;
    }
    for (size_t m = 0; m < v.recv.size(); ++m)
        if (v.recv[m].offset != 0 || v.recv[m].bytes != v.recv[0].bytes)
            return fmt::format("the result block from rank {} is [{}, +{}), not [0, +{})", m,
                               v.recv[m].offset, v.recv[m].bytes, v.recv[0].bytes);
    return {};
}

uint64_t reduction_layout_digest(const MemberVector &v) {
    uint64_t h = kFnvOffset;  // over the lengths
    for (const VectorBlock &b : v.send) h = fnv1a_u64(b.bytes, h);
    return h;
}

dp_status_t decode_collective_counts(Collective c, const void *block, uint64_t bytes,
                                     uint32_t team_size, uint64_t element_bytes,
                                     uint64_t max_bytes, MemberVector *out, std::string *why) {
    if (const dp_status_t s =
            decode_vector_counts(block, bytes, team_size, element_bytes, max_bytes, out, why);
        s != DP_OK)
        return s;
    if (reduces(c))
        if (std::string problem = reduction_layout_problem(*out); !problem.empty()) {
            *why = std::move(problem);
            return DP_ERR_INVALID;
        }
    return DP_OK;
}

std::string vector_difference(std::span<const MemberVector *const> members) {
    for (size_t r = 0; r < members.size(); ++r) {
        if (!members[r]) continue;
        for (size_t m = 0; m < members.size(); ++m) {
            if (!members[m]) continue;
            const uint64_t sent = members[r]->send[m].bytes, expected = members[m]->recv[r].bytes;
            if (sent != expected)
                return fmt::format("rank {} sends {} bytes to rank {}, which expects {}", r, sent,
                                   m, expected);
        }
    }
    return {};
}

}  // namespace deputy::coll
