#include "coll/collective.h"

#include <limits>

#include "coll/region.h"

namespace deputy::coll {
namespace {

constexpr const char *kCollectiveNames[] = {
    "allreduce", "reduce_scatter", "allgather", "alltoall", "bcast", "barrier",
};
static_assert(std::size(kCollectiveNames) == kCollectiveCount);

constexpr const char *kBufferNames[] = {"source", "destination", "scratch"};
static_assert(std::size(kBufferNames) == kBufferCount);

// The factor P (or 1) by which a buffer exceeds the per-rank n bytes.
size_t source_blocks(const CollectiveArgs &a) {
    if (a.in_place) return 0;
    switch (a.collective) {
        case Collective::allreduce:
        case Collective::allgather:
            return 1;
        case Collective::reduce_scatter:
        case Collective::alltoall:
            return static_cast<size_t>(a.size);
        case Collective::bcast:
        case Collective::barrier:
            return 0;
    }
    return 0;
}

size_t destination_blocks(const CollectiveArgs &a) {
    switch (a.collective) {
        case Collective::allreduce:
        case Collective::bcast:
            return 1;
        case Collective::reduce_scatter:
            return a.in_place ? static_cast<size_t>(a.size) : 1;
        case Collective::allgather:
        case Collective::alltoall:
            return static_cast<size_t>(a.size);
        case Collective::barrier:
            return 0;
    }
    return 0;
}

}  // namespace

const char *collective_name(Collective c) {
    const auto i = static_cast<size_t>(c);
    return i < std::size(kCollectiveNames) ? kCollectiveNames[i] : "unknown";
}

std::optional<Collective> collective_from_name(std::string_view name) {
    for (size_t i = 0; i < std::size(kCollectiveNames); ++i) {
        if (name == kCollectiveNames[i]) return static_cast<Collective>(i);
    }
    return std::nullopt;
}

const char *buffer_name(BufferId id) {
    const auto i = static_cast<size_t>(id);
    return i < std::size(kBufferNames) ? kBufferNames[i] : "unknown";
}

dp_status_t check_args(const CollectiveArgs &a) {
    if (static_cast<size_t>(a.collective) >= kCollectiveCount) return DP_ERR_INVALID;
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) return DP_ERR_INVALID;
    if (a.dtype < 0 || a.dtype >= DP_DTYPE_COUNT) return DP_ERR_INVALID;
    if (reduces(a.collective) && (a.op < 0 || a.op >= DP_OP_COUNT)) return DP_ERR_INVALID;
    if (a.collective == Collective::bcast && (a.root < 0 || a.root >= a.size)) {
        return DP_ERR_INVALID;
    }
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
