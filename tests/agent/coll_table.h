// Every collective of the one table (coll/collective.h) on a team, checked
// against the one reference (tests/coll/reference.h): counts 0, 1, 13 and
// 4097 (or others), roots first and last (or every one), in place where MPI
// has a form for it, int32
// and float32 sums (floats: the rank order of a reduction shows in the
// bits). Members a rooted collective does not write to pass NULL there,
// and what is not written stays untouched. Used on one agent
// (coll_table_test.cc) and across nodes (nodes_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "coll/collective.h"
#include "coll/reference.h"
#include "coll_test_util.h"

namespace deputy::testing {

using deputy::coll::Collective;

// The C API's call for each collective (alltoallv has its own test; the
// other vector collectives with equal counts, the plain forms' layouts).
// The first `len` bytes of `from` to `to` (an empty vector's data() may be
// null, which memcpy must not get even for 0 bytes).
inline void copy(uint8_t *to, const std::vector<uint8_t> &from, size_t len) {
    if (len) std::memcpy(to, from.data(), len);
}

inline dp_status_t post_collective(Collective c, const void *src, void *dst, size_t count, dp_dtype_t dtype,
                 int root, dp_team_t *team, dp_request_t **req) {
    switch (c) {
        case Collective::allreduce: return dp_iallreduce(src, dst, count, dtype, DP_SUM, team, req);
        case Collective::reduce_scatter:
            return dp_ireduce_scatter(src, dst, count, dtype, DP_SUM, team, req);
        case Collective::allgather: return dp_iallgather(src, dst, count, dtype, team, req);
        case Collective::alltoall: return dp_ialltoall(src, dst, count, dtype, team, req);
        case Collective::bcast: return dp_ibcast(dst, count, dtype, root, team, req);
        case Collective::barrier: return dp_ibarrier(team, req);
        case Collective::alltoallv: return DP_ERR_UNSUPPORTED;
        case Collective::reduce: return dp_ireduce(src, dst, count, dtype, DP_SUM, root, team, req);
        case Collective::gather: return dp_igather(src, dst, count, dtype, root, team, req);
        case Collective::scatter: return dp_iscatter(src, dst, count, dtype, root, team, req);
        case Collective::scan: return dp_iscan(src, dst, count, dtype, DP_SUM, team, req);
        case Collective::exscan: return dp_iexscan(src, dst, count, dtype, DP_SUM, team, req);
        case Collective::allgatherv:
        case Collective::gatherv:
        case Collective::scatterv:
        case Collective::reduce_scatterv: {
            const auto p = size_t(dp_team_size(team));
            std::vector<size_t> counts(p, count), displs(p);
            for (size_t m = 0; m < p; ++m) displs[m] = m * count;
            if (c == Collective::reduce_scatterv)
                return dp_ireduce_scatterv(src, dst, counts.data(), dtype, DP_SUM, team, req);
            if (c == Collective::allgatherv)
                return dp_iallgatherv(src, count, dst, counts.data(), displs.data(), dtype, team,
                                      req);
            if (c == Collective::gatherv)
                return dp_igatherv(src, count, dst, counts.data(), displs.data(), dtype, root,
                                   team, req);
            return dp_iscatterv(src, counts.data(), displs.data(), dst, count, dtype, root, team,
                                req);
        }
    }
    return DP_ERR_INTERNAL;
}

// Where member r's input goes and its result comes out, in place: MPI's
// MPI_IN_PLACE as deputy spells it (coll/collective.h). False when the
// collective has no in-place form for this member.
inline bool in_place_form(Collective c, int r, int root) {
    switch (c) {
        case Collective::allreduce:
        case Collective::alltoall:
        case Collective::allgather:
        case Collective::allgatherv:
            return true;
        case Collective::reduce:
        case Collective::gather:
        case Collective::scatter:
        case Collective::gatherv:
        case Collective::scatterv:
            return r == root;  // (MPI_IN_PLACE is the root's only)
        case Collective::reduce_scatter:
        case Collective::bcast:
        case Collective::barrier:
        case Collective::alltoallv:
        case Collective::scan:  // (none: coll::has_in_place)
        case Collective::exscan:
        case Collective::reduce_scatterv:
            return false;
    }
    return false;
}

// The cases check_table runs: counts, and roots first and last or every one.
struct TableShape {
    std::vector<size_t> counts{0, 1, 13, 4097};
    bool every_root = false;
    std::vector<int> roots(const Collective c, int p) const {
        std::vector<int> out;
        if (!deputy::coll::rooted(c)) return {0};
        if (every_root)
            for (int r = 0; r < p; ++r) out.push_back(r);
        else
            out = p == 1 ? std::vector<int>{0} : std::vector<int>{0, p - 1};
        return out;
    }
};

// Every collective of the table on `team` (Team, or nodes_test's team over
// several agents): team_of(r) is member r's dp_team_t, `label` goes into
// failure messages. A team whose members are in other processes
// (tests/multinode/table_member.cc) has `mine(r)`: only those members are
// posted by its run() and checked here; every process lays out the same
// inputs, so each checks its own part against the one reference.
template <typename TeamT, typename TeamOf>
void check_table(TeamT &team, TeamOf team_of, const std::string &label,
                 const TableShape &shape_of_cases = {}) {
            const int p = team.size();
            for (int i = 0; i < deputy::coll::kCollectiveCount; ++i) {
                const auto c = Collective(i);
                if (c == Collective::alltoallv || c == Collective::barrier) continue;
                for (dp_dtype_t dtype : {DP_INT32, DP_FLOAT32}) {
                    if (dtype == DP_FLOAT32 && !deputy::coll::reduces(c)) continue;
                    for (size_t count : shape_of_cases.counts) {
                        for (int root : shape_of_cases.roots(c, p)) {
                            for (bool in_place : {false, true}) {
                                deputy::coll::CollectiveArgs shape;
                                shape.collective = c;
                                shape.size = p;
                                shape.count = count;
                                shape.dtype = dtype;
                                shape.op = DP_SUM;
                                shape.root = root;
                                const size_t n = count * dp_dtype_size(dtype);
                                const size_t in_bytes = deputy::test::input_bytes(shape);
                                std::vector<std::vector<uint8_t>> inputs(p);
                                std::vector<uint8_t *> src(p, nullptr), dst(p, nullptr);
                                std::vector<uint8_t *> owned_src(p, nullptr), owned_dst(p, nullptr);
                                std::vector<size_t> dst_bytes(p, 0);
                                for (int r = 0; r < p; ++r) {
                                    const auto need = deputy::coll::member_bytes(
                                        c, count, dp_dtype_size(dtype), uint32_t(p), uint32_t(r),
                                        uint32_t(root));
                                    inputs[r].resize(in_bytes);
                                    deputy::testing::fill(inputs[r].data(), in_bytes,
                                                          uint32_t(r * 31 + count + i), dtype);
                                    const bool here = in_place && in_place_form(c, r, root);
                                    if (c == Collective::bcast) {
                                        owned_dst[r] = dst[r] = team.buffer(r, n);
                                        dst_bytes[r] = n;
                                        if (r == root) copy(dst[r], inputs[r], n);
                                        else std::memset(dst[r], 0xcd, n);
                                        continue;
                                    }
                                    const bool allgathers = c == Collective::allgather ||
                                                            c == Collective::allgatherv;
                                    const bool gathers =
                                        c == Collective::gather || c == Collective::gatherv;
                                    if (here && (c == Collective::scatter ||
                                                 c == Collective::scatterv)) {
                                        // Its block stays in its source.
                                        owned_src[r] = src[r] = team.buffer(r, in_bytes);
                                        copy(src[r], inputs[r], in_bytes);
                                        dst[r] = src[r] + size_t(r) * n;
                                        dst_bytes[r] = n;
                                        continue;
                                    }
                                    if (need.destination || here) {
                                        dst_bytes[r] = std::max(need.destination, in_bytes);
                                        owned_dst[r] = dst[r] = team.buffer(r, dst_bytes[r]);
                                        std::memset(dst[r], 0xcd, dst_bytes[r]);
                                    }
                                    if (here) {
                                        // The input where MPI_IN_PLACE puts it.
                                        const size_t at = allgathers ? size_t(r) * n
                                                          : gathers  ? size_t(root) * n
                                                                     : 0;
                                        src[r] = dst[r] + at;
                                        copy(src[r], inputs[r],
                                             allgathers || gathers ? n : in_bytes);
                                    } else if (need.source) {
                                        owned_src[r] = src[r] = team.buffer(r, in_bytes);
                                        copy(src[r], inputs[r], in_bytes);
                                    }
                                }
                                const auto expected = deputy::test::expected_outputs(shape, inputs);
                                std::vector<std::vector<uint8_t>> before(p);
                                for (int r = 0; r < p; ++r)
                                    if (dst[r]) before[r].assign(dst[r], dst[r] + dst_bytes[r]);
                                const auto st = team.run([&](int r, dp_request_t **q) {
                                    return post_collective(c, src[r], dst[r], count, dtype, root,
                                                team_of(r), q);
                                });
                                const std::string where =
                                    std::string(deputy::coll::collective_name(c)) + " p " +
                                    std::to_string(p) + " count " + std::to_string(count) +
                                    " root " + std::to_string(root) + " in_place " +
                                    std::to_string(in_place) + " " + label +
                                    (dtype == DP_FLOAT32 ? " float32" : " int32");
                                for (int r = 0; r < p; ++r) {
                                    if constexpr (requires { team.mine(0); }) {
                                        if (!team.mine(r)) continue;
                                    }
                                    ASSERT_EQ(st[r], DP_OK) << where << " rank " << r;
                                    const std::vector<uint8_t> &want = expected[r];
                                    if (!want.empty()) {
                                        const size_t len = c == Collective::reduce_scatter
                                                               ? n
                                                               : std::min(want.size(), dst_bytes[r]);
                                        ASSERT_EQ(std::memcmp(dst[r], want.data(), len), 0)
                                            << where << " rank " << r;
                                    } else if (dst[r] && dst_bytes[r]) {
                                        // Not this member's to receive: untouched.
                                        ASSERT_EQ(std::memcmp(dst[r], before[r].data(),
                                                              dst_bytes[r]),
                                                  0)
                                            << where << " rank " << r << ": written";
                                    }
                                }
                                if constexpr (requires { team.release(0, nullptr); }) {
                                    for (int r = 0; r < p; ++r) {
                                        if (owned_src[r]) team.release(r, owned_src[r]);
                                        if (owned_dst[r]) team.release(r, owned_dst[r]);
                                    }
                                }
                            }
                        }
                    }
                }
            }
}

}  // namespace deputy::testing
