#include "coll/collective.h"

#include <algorithm>
#include <limits>

#include "coll/region.h"
#include "mover/names.h"

namespace deputy::coll {
namespace {

constexpr CollectiveInfo::BusFactor two_rounds{[](int p) { return 2.0 * (p - 1) / p; }, "2(n-1)/n"};
constexpr CollectiveInfo::BusFactor one_round{[](int p) { return double(p - 1) / p; }, "(n-1)/n"};
constexpr CollectiveInfo::BusFactor whole{[](int) { return 1.0; }, "1"};
constexpr CollectiveInfo::BusFactor none{[](int) { return 0.0; }, "0 (no bytes)"};

constexpr uint8_t P = kBlocksPerMember;
// Indexed by Collective (checked below).
constexpr CollectiveInfo kCollectives[] = {
    {Collective::allreduce, "allreduce", true, Rooting::none, 1, 1, two_rounds},
    {Collective::reduce_scatter, "reduce_scatter", true, Rooting::none, P, 1, one_round},
    {Collective::allgather, "allgather", false, Rooting::none, 1, P, one_round},
    {Collective::alltoall, "alltoall", false, Rooting::none, P, P, one_round},
    {Collective::bcast, "bcast", false, Rooting::one_buffer, 1, 1, whole},
    {Collective::barrier, "barrier", false, Rooting::none, 0, 0, none},
    {Collective::alltoallv, "alltoallv", false, Rooting::none, P, P, one_round, true, false},
    // nccl-tests: reduce moves n to the root like a bcast (factor 1);
    // gather and scatter move (P-1) of P blocks through the root.
    {Collective::reduce, "reduce", true, Rooting::into_root, 1, 1, whole, false, false},
    {Collective::gather, "gather", false, Rooting::into_root, 1, P, one_round, false, false},
    {Collective::scatter, "scatter", false, Rooting::out_of_root, P, 1, one_round, false, false},
    {Collective::scan, "scan", true, Rooting::none, 1, 1, whole, false, false},
    {Collective::exscan, "exscan", true, Rooting::none, 1, 1, whole, false, false},
    {Collective::allgatherv, "allgatherv", false, Rooting::none, 1, P, one_round, true, false},
    {Collective::gatherv, "gatherv", false, Rooting::into_root, 1, P, one_round, true, false},
    {Collective::scatterv, "scatterv", false, Rooting::out_of_root, P, 1, one_round, true, false},
    {Collective::reduce_scatterv, "reduce_scatterv", true, Rooting::none, P, 1, one_round, true,
     false},
};
static_assert(std::size(kCollectives) == kCollectiveCount);
constexpr bool in_order() {
    for (size_t i = 0; i < std::size(kCollectives); ++i)
        if (size_t(kCollectives[i].collective) != i) return false;
    return true;
}
static_assert(in_order(), "kCollectives is indexed by Collective");

constexpr const char *kBufferNames[] = {"source", "destination", "scratch"};
static_assert(std::size(kBufferNames) == kBufferCount);

size_t blocks(uint8_t table_blocks, int size) {
    return table_blocks == P ? static_cast<size_t>(size) : table_blocks;
}

// The factor P (or 1) by which a schedule's buffer exceeds the per-rank n
// bytes. bcast works in its one buffer (the destination); in place the
// destination holds the input too.
size_t source_blocks(const CollectiveArgs &a) {
    const CollectiveInfo &c = kCollectives[size_t(a.collective)];
    return a.in_place || c.rooting == Rooting::one_buffer ? 0 : blocks(c.source_blocks, a.size);
}

size_t destination_blocks(const CollectiveArgs &a) {
    const CollectiveInfo &c = kCollectives[size_t(a.collective)];
    const size_t dst = blocks(c.dest_blocks, a.size);
    return a.in_place ? std::max(dst, blocks(c.source_blocks, a.size)) : dst;
}

}  // namespace

const CollectiveInfo &collective_info(Collective c) {
    const auto i = static_cast<size_t>(c);
    return kCollectives[i < std::size(kCollectives) ? i : 0];
}

const char *collective_name(Collective c) {
    const auto i = static_cast<size_t>(c);
    return i < std::size(kCollectives) ? kCollectives[i].name : "unknown";
}

std::optional<Collective> collective_from_name(std::string_view name) {
    for (const CollectiveInfo &info : kCollectives)
        if (name == info.name) return info.collective;
    return std::nullopt;
}

std::optional<Collective> collective_from_byte(uint8_t value) {
    if (value >= std::size(kCollectives)) return std::nullopt;
    return static_cast<Collective>(value);
}

MemberBytes member_bytes(Collective c, uint64_t count, uint64_t element_bytes, uint32_t size,
                         uint32_t rank, uint32_t root) {
    const CollectiveInfo &info = collective_info(c);
    const uint64_t n = count * element_bytes;
    auto blocks = [&](uint8_t b) { return b == kBlocksPerMember ? uint64_t(size) * n : b * n; };
    MemberBytes out{blocks(info.source_blocks), blocks(info.dest_blocks)};
    switch (info.rooting) {
        case Rooting::none: break;
        case Rooting::one_buffer:  // the root's data goes out, the others' comes in
            if (rank == root) out.destination = 0;
            else out.source = 0;
            break;
        case Rooting::into_root:
            if (rank != root) out.destination = 0;
            break;
        case Rooting::out_of_root:
            if (rank != root) out.source = 0;
            break;
    }
    // Rank 0's exscan result is undefined (MPI): nothing is written there.
    if (c == Collective::exscan && rank == 0) out.destination = 0;
    return out;
}

const char *buffer_name(BufferId id) {
    const auto i = static_cast<size_t>(id);
    return i < std::size(kBufferNames) ? kBufferNames[i] : "unknown";
}

dp_status_t check_args(const CollectiveArgs &a) {
    if (static_cast<size_t>(a.collective) >= kCollectiveCount) return DP_ERR_INVALID;
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) return DP_ERR_INVALID;
    if (a.dtype < 0 || a.dtype >= DP_DTYPE_COUNT) return DP_ERR_INVALID;
    if (reduces(a.collective) && (a.op < 0 || !mover::op_applies(unsigned(a.dtype), unsigned(a.op))))
        return DP_ERR_INVALID;
    if (rooted(a.collective) && (a.root < 0 || a.root >= a.size))
        return DP_ERR_INVALID;
    // Every byte offset a schedule computes is below P * n, so checking that
    // product once keeps all later arithmetic in range.
    constexpr size_t kMax = std::numeric_limits<size_t>::max();
    const size_t element = dp_dtype_size(a.dtype);
    if (a.count > kMax / element) return DP_ERR_TOO_LARGE;
    if (a.count * element > kMax / static_cast<size_t>(a.size) / 4) return DP_ERR_TOO_LARGE;
    return DP_OK;
}

size_t source_bytes(const CollectiveArgs &a) {
    return source_blocks(a) * a.count * dp_dtype_size(a.dtype);
}

size_t destination_bytes(const CollectiveArgs &a) {
    return destination_blocks(a) * a.count * dp_dtype_size(a.dtype);
}

}  // namespace deputy::coll
