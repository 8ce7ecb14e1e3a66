// What every execution checks before it runs, one node or several: the
// local members' heads agree and are valid, a vector collective's counts
// blocks (the agent's copies) decode and agree, and every buffer is the
// member's (its memory then held while the engines may touch it).
#include <fmt/format.h>

#include <algorithm>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"

namespace deputy::agent {

uint8_t TeamEngine::check_heads(Team &t, const std::vector<channel::CollPost> &heads) {
    const uint32_t first = t.local_ranks.front();
    const channel::CollPost &h0 = heads[first];
    for (uint32_t r : t.local_ranks) {
        const std::string diff = head_difference(h0, heads[r]);
        if (diff.empty()) continue;
        DP_LOG_WARN("agent: team '{}' operation {}: ranks {} and {} disagree: {}", t.key, t.ops,
                    first, r, diff);
        return channel::kCollMismatch;
    }
    return head_invalid(h0, t.size);
}

namespace {

uint8_t vector_status(dp_status_t s) {
    switch (s) {
        case DP_OK: return 0;
        case DP_ERR_DENIED: return DP_COMP_ADDRESS_DENIED;
        case DP_ERR_TOO_LARGE: return DP_COMP_INVALID_SIZE;
        default: return DP_COMP_INVALID_FIELD;
    }
}

}  // namespace

uint8_t TeamEngine::check_vectors(Team &t, Execution &ex, const std::vector<Posted> &posted) {
    if (!coll::is_vector(ex.collective)) return 0;
    const uint64_t esize = mover::dtype_size(ex.heads[t.local_ranks.front()].dtype);
    ex.vectors.assign(t.size, {});
    std::vector<const coll::MemberVector *> present(t.size, nullptr);
    for (uint32_t r : t.local_ranks) {
        const Posted &p = posted[r];
        if (p.counts_status) return p.counts_status;  // logged when the post arrived
        std::string why;
        const dp_status_t s =
            coll::decode_collective_counts(ex.collective, p.counts.data(), p.counts.size(),
                                           t.size, esize, kMaxCollBytes, &ex.vectors[r], &why);
        if (s != DP_OK) {
            DP_LOG_WARN("agent: team '{}' {}: rank {}'s counts: {}", t.key,
                        coll::collective_name(ex.collective), r, why);
            return vector_status(s);
        }
        present[r] = &ex.vectors[r];
    }
    const std::string diff = coll::vector_difference(present);
    if (!diff.empty()) {
        DP_LOG_WARN("agent: team '{}' operation {}: {}: {}", t.key, t.ops,
                    coll::collective_name(ex.collective), diff);
        return channel::kCollMismatch;
    }
    return 0;
}

uint8_t TeamEngine::bind_members(Team &t, Execution &ex) {
    const channel::CollPost &h0 = ex.heads[t.local_ranks.front()];
    const uint64_t esize = mover::dtype_size(h0.dtype);
    const bool vector = coll::is_vector(ex.collective);
    ex.buffers.members.assign(t.size, {});
    for (uint32_t r : t.local_ranks) {
        ClientSession *c = hooks_.find_client(t.client_of(r));
        if (!c) return channel::kCollMemberLost;
        const ClientSpace &space = c->space();
        if (vector) {
            if (uint8_t bad = bind_vector_member(t, ex, r, space)) return bad;
            ex.memories.push_back(c->memory);
            continue;
        }
        const coll::MemberBytes need =
            coll::member_bytes(ex.collective, h0.count, esize, t.size, r, h0.root);
        auto reachable = [&](uint64_t addr, uint64_t bytes) {
            return bytes == 0 || space.in_pool(addr, bytes) || space.direct_allows(addr, bytes);
        };
        const channel::CollPost &h = ex.heads[r];
        if (!reachable(h.src, need.source) || !reachable(h.dst, need.destination)) {
            const bool src_ok = reachable(h.src, need.source);
            DP_LOG_LIMITED(space.log(),
                           "agent: team '{}' {}: rank {}'s {} [0x{:x}, +{}) is outside its pool "
                           "and registered memory",
                           t.key, coll::collective_name(ex.collective), r,
                           src_ok ? "destination" : "source", src_ok ? h.dst : h.src,
                           src_ok ? need.destination : need.source);
            return DP_COMP_ADDRESS_DENIED;
        }
        // A collective without an in-place form (bcast has one buffer by
        // design) would read what its own tasks write: refused.
        if (ex.collective != coll::Collective::bcast && !coll::has_in_place(ex.collective) &&
            coll::ranges_overlap(h.src, need.source, h.dst, need.destination)) {
            DP_LOG_LIMITED(space.log(),
                           "agent: team '{}' {}: rank {}'s source and destination overlap (there "
                           "is no in-place form)",
                           t.key, coll::collective_name(ex.collective), r);
            return DP_COMP_INVALID_FIELD;
        }
        ex.buffers.members[r] = {&space, h.src, h.dst};
        if ((need.source && !space.in_pool(h.src, need.source)) ||
            (need.destination && !space.in_pool(h.dst, need.destination)))
            ex.buffers.through_process = true;
        ex.memories.push_back(c->memory);
        ex.bytes = std::max(ex.bytes, need.destination);
    }
    return 0;
}

uint8_t TeamEngine::bind_vector_member(Team &t, Execution &ex, uint32_t r,
                                       const ClientSpace &space) {
    const channel::CollPost &h = ex.heads[r];
    const coll::MemberVector &v = ex.vectors[r];
    // alltoallv has no in-place form; the other vector collectives' own
    // block moves nowhere in place (its counts say 0), so a member's source
    // may lie in its destination: what it reads there no member writes
    // (the blocks others write are its receive blocks, which the counts
    // place), and a member that lies about that spoils its own buffer.
    if (!coll::has_in_place(ex.collective) && h.src == h.dst && (v.send_total || v.recv_total)) {
        DP_LOG_LIMITED(space.log(), "agent: team '{}' {}: rank {} gave one buffer as source and "
                       "destination (there is no in-place form)",
                       t.key, coll::collective_name(ex.collective), r);
        return DP_COMP_INVALID_FIELD;
    }
    bool through_process = false;
    for (int side = 0; side < 2; ++side) {
        const uint64_t base = side == 0 ? h.src : h.dst;
        const std::vector<coll::VectorBlock> &blocks = side == 0 ? v.send : v.recv;
        for (uint32_t m = 0; m < t.size; ++m) {
            const coll::VectorBlock &b = blocks[m];
            if (b.bytes == 0) continue;
            uint64_t addr;
            const bool wraps = __builtin_add_overflow(base, b.offset, &addr) ||
                               addr + b.bytes < addr;
            const bool in_pool = !wraps && space.in_pool(addr, b.bytes);
            if (!in_pool && (wraps || !space.direct_allows(addr, b.bytes))) {
                DP_LOG_LIMITED(space.log(),
                               "agent: team '{}' {}: rank {}'s {} block {} [0x{:x} + {}, +{}) is "
                               "outside its pool and registered memory",
                               t.key, coll::collective_name(ex.collective), r,
                               side == 0 ? "source" : "destination", m, base, b.offset, b.bytes);
                return DP_COMP_ADDRESS_DENIED;
            }
            through_process |= !in_pool;
        }
    }
    ex.buffers.members[r] = {&space, h.src, h.dst};
    ex.buffers.through_process |= through_process;
    ex.bytes = std::max(ex.bytes, v.recv_total);
    return 0;
}

}  // namespace deputy::agent
