#include "channel/coll_post.h"

#include <fmt/format.h>

#include "mover/names.h"

namespace deputy::channel {

const char *coll_status_name(uint8_t status) {
    switch (status) {
        case kCollMismatch: return "mismatch";
        case kCollMemberLost: return "member_lost";
        case kCollQueueFull: return "queue_full";
        case kP2pTruncated: return "truncated";
        default: return mover::comp_status_name(status);
    }
}

// The collective a post names (a byte a client chose: checked).
std::optional<coll::Collective> collective_of(const CollPost &p) {
    return coll::collective_from_byte(uint8_t(p.opcode - kCollPostBase));
}
const char *collective_name_of(const CollPost &p) {
    const auto c = collective_of(p);
    return c ? coll::collective_name(*c) : "unknown";
}

// How two members' heads differ (empty: they agree), for kCollMismatch.
std::string head_difference(const CollPost &a, const CollPost &b) {
    if (b.opcode != a.opcode)
        return fmt::format("operation {} vs {}", collective_name_of(a), collective_name_of(b));
    const auto c = collective_of(a);
    if (c == coll::Collective::barrier) return {};
    if (b.count != a.count) return fmt::format("count {} vs {}", a.count, b.count);
    if (b.dtype != a.dtype) return fmt::format("dtype {} vs {}", a.dtype, b.dtype);
    if (c && coll::reduces(*c) && b.redop != a.redop)
        return fmt::format("reduction {} vs {}", a.redop, b.redop);
    if (c && coll::rooted(*c) && b.root != a.root)
        return fmt::format("root {} vs {}", a.root, b.root);
    return {};
}

// A completion status for fields out of range in agreed heads; 0 if fine.
// A vector collective's counts block and count are checked per member
// (TeamEngine::check_vectors): here only that the others carry none.
uint8_t head_invalid(const CollPost &h, uint32_t team_size) {
    const auto c = collective_of(h);
    if (!c) return DP_COMP_INVALID_OPCODE;
    if (h.reserved0) return DP_COMP_INVALID_FIELD;
    const bool vector = coll::is_vector(*c);
    if (vector ? h.count != 0 : (h.counts_bytes != 0 || h.counts != 0))
        return DP_COMP_INVALID_FIELD;
    if (*c == coll::Collective::barrier) return 0;
    const uint64_t esize = mover::dtype_size(h.dtype);
    if (esize == 0 || (coll::reduces(*c) && !mover::op_applies(h.dtype, h.redop)) ||
        (coll::rooted(*c) && h.root >= team_size))
        return DP_COMP_INVALID_FIELD;
    if (h.count > kMaxCollBytes / esize / team_size) return DP_COMP_INVALID_SIZE;
    return 0;
}

}  // namespace deputy::channel
