// dp_iallgatherv, dp_igatherv, dp_iscatterv and dp_ireduce_scatterv against a real agent (2
// engines): uneven counts with zeros, receive blocks in reverse rank order
// with gaps between them, 1..4 members, roots first and last, in place and
// not, every memory mode; every destination byte checked (a received
// block's bytes where one lands, else untouched, guards included). Then
// what must fail: a member's own count that is not its entry (at the call),
// receive blocks that overlap (at the call), members whose blocks disagree
// (DP_ERR_MISMATCH on every member, nothing written, the team goes on).
// Each run by the agent, then by the members themselves (every member
// waiting from its own thread): the same bytes and the same errors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "agent_test_util.h"
#include "coll_test_util.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::kAllMemory;
using deputy::testing::Memory;
using deputy::testing::name;
using deputy::testing::Team;

constexpr size_t kGuard = 64;  // bytes before and after each destination
constexpr uint8_t kUntouched = 0xC3;
constexpr size_t kGap = 2;  // elements between receive blocks

enum class Kind { allgatherv, gatherv, scatterv };
const char *kind_name(Kind k) {
    return k == Kind::allgatherv ? "allgatherv" : k == Kind::gatherv ? "gatherv" : "scatterv";
}

// Member m's block: counts[m] elements; in the gathering buffer (every
// destination of allgatherv, the root's of gatherv, the root's source of
// scatterv) at displs[m], blocks in reverse rank order with gaps.
struct Blocks {
    std::vector<size_t> counts, displs;
    size_t extent = 0;  // elements of the gathering buffer
};
Blocks make_blocks(int p, size_t max_count, uint32_t seed) {
    std::mt19937 random(seed);
    Blocks b;
    b.counts.resize(size_t(p));
    b.displs.resize(size_t(p));
    for (int m = 0; m < p; ++m)
        b.counts[size_t(m)] = (m + seed) % 3 == 1 ? 0 : 1 + random() % max_count;
    size_t at = kGap;
    for (int m = p - 1; m >= 0; --m) {
        b.displs[size_t(m)] = at;
        at += b.counts[size_t(m)] + kGap;
    }
    b.extent = at;
    return b;
}

struct Outcome {
    std::vector<uint8_t *> src, dst;  // dst points past its leading guard
    std::vector<size_t> dst_bytes;    // without guards
    std::vector<std::vector<uint8_t>> before;  // each dst (with guards) before the call
    std::vector<dp_status_t> status;
};

// Whether member r's gathering buffer is its destination (allgatherv,
// gatherv's root) or its source (scatterv's root).
bool gathers_into(Kind k, int r, int root) {
    return k == Kind::allgatherv || (k == Kind::gatherv && r == root);
}

Outcome run(Team &team, Kind k, const Blocks &b, dp_dtype_t dtype, int root, bool in_place,
            uint32_t seed) {
    const int p = team.size();
    const size_t e = dp_dtype_size(dtype);
    std::mt19937 random(seed);
    Outcome out;
    out.src.assign(size_t(p), nullptr);
    out.dst.assign(size_t(p), nullptr);
    out.dst_bytes.assign(size_t(p), 0);
    out.before.resize(size_t(p));
    for (int r = 0; r < p; ++r) {
        const size_t own = b.counts[size_t(r)] * e;
        const bool root_side = k == Kind::scatterv && r == root;
        const bool here = in_place && (k == Kind::allgatherv || r == root);
        // The destination, with guards.
        out.dst_bytes[size_t(r)] = gathers_into(k, r, root) ? b.extent * e : own;
        if (!(here && root_side)) {
            uint8_t *whole = team.buffer(r, out.dst_bytes[size_t(r)] + 2 * kGuard);
            std::memset(whole, kUntouched, out.dst_bytes[size_t(r)] + 2 * kGuard);
            out.dst[size_t(r)] = whole + kGuard;
        }
        // The source: this member's block, or the root's whole scatterv buffer.
        const size_t src_bytes = root_side ? b.extent * e : own;
        uint8_t *src = nullptr;
        if (here && !root_side) {
            src = out.dst[size_t(r)] + b.displs[size_t(r)] * e;  // its block is already there
        } else if (k != Kind::scatterv || root_side) {
            src = team.buffer(r, src_bytes + 1);
        }
        if (src)
            for (size_t i = 0; i < src_bytes; ++i) src[i] = uint8_t(random());
        out.src[size_t(r)] = src;
        if (here && root_side) {  // its own block stays in its source
            out.dst[size_t(r)] = src + b.displs[size_t(r)] * e;
            out.dst_bytes[size_t(r)] = own;
        }
        if (out.dst[size_t(r)] && !(here && root_side))
            out.before[size_t(r)].assign(out.dst[size_t(r)] - kGuard,
                                         out.dst[size_t(r)] + out.dst_bytes[size_t(r)] + kGuard);
    }
    out.status = team.run([&](int r, dp_request_t **q) {
        const size_t own = b.counts[size_t(r)];
        const bool at_root = r == root;
        switch (k) {
            case Kind::allgatherv:
                return dp_iallgatherv(out.src[size_t(r)], own, out.dst[size_t(r)],
                                      b.counts.data(), b.displs.data(), dtype, team[r].team, q);
            case Kind::gatherv:
                return dp_igatherv(out.src[size_t(r)], own, at_root ? out.dst[size_t(r)] : nullptr,
                                   at_root ? b.counts.data() : nullptr,
                                   at_root ? b.displs.data() : nullptr, dtype, root,
                                   team[r].team, q);
            case Kind::scatterv:
                return dp_iscatterv(at_root ? out.src[size_t(r)] : nullptr,
                                    at_root ? b.counts.data() : nullptr,
                                    at_root ? b.displs.data() : nullptr, out.dst[size_t(r)], own,
                                    dtype, root, team[r].team, q);
        }
        return DP_ERR_INTERNAL;
    });
    return out;
}

// Every byte of every destination: what the collective delivers there, the
// rest as it was.
void expect_exact(Kind k, const Blocks &b, const Outcome &o, dp_dtype_t dtype, int root,
                  bool in_place, const std::string &where) {
    const int p = int(b.counts.size());
    const size_t e = dp_dtype_size(dtype);
    for (int r = 0; r < p; ++r) {
        if (k == Kind::scatterv && in_place && r == root) {
            // Its block stays in its source: the source is read, never written.
            continue;
        }
        if (!o.dst[size_t(r)]) continue;
        std::vector<uint8_t> want = o.before[size_t(r)];
        if (gathers_into(k, r, root)) {
            for (int m = 0; m < p; ++m) {
                if (in_place && m == r) continue;  // (already there: before holds it)
                std::memcpy(want.data() + kGuard + b.displs[size_t(m)] * e, o.src[size_t(m)],
                            b.counts[size_t(m)] * e);
            }
        } else if (k == Kind::scatterv) {
            std::memcpy(want.data() + kGuard, o.src[size_t(root)] + b.displs[size_t(r)] * e,
                        b.counts[size_t(r)] * e);
        }  // (gatherv off the root: nothing arrives)
        ASSERT_EQ(std::memcmp(o.dst[size_t(r)] - kGuard, want.data(), want.size()), 0)
            << where << " rank " << r;
    }
}

class VectorGatherTest : public ::testing::Test {
  protected:
    AgentProcess agent{{"--engines", "2"}};
    int next_key = 0;
    std::string key() { return "vg" + std::to_string(next_key++); }
    // Every member waits from a thread of its own, so that the members may
    // run the operations themselves (client/rank_execution.h); where
    // `members_only` the agent is stopped meanwhile, so that only they can.
    bool together = false;
    void join_as_set(Team &team) const {
        if (together) team.wait_together();
    }
    bool members_only(Memory memory) const { return together && memory != Memory::direct; }
    void uneven_gathers();
    void uneven_reduce_scatterv();
    void disagreeing_gathers();
    void disagreeing_reduce_scatterv();
    // The test body run by the agent, then with the members waiting
    // together.
    template <typename Body>
    void both_ways(Body body) {
        body();
        together = true;
        body();
    }
};

void VectorGatherTest::uneven_gathers() {
    uint32_t seed = 1;
    for (Memory memory : kAllMemory)
        for (int p : {1, 2, 3, 4}) {
            Team team(agent, p, key(), memory);
            join_as_set(team);
            const deputy::testing::AgentPaused paused(agent, members_only(memory));
            for (Kind k : {Kind::allgatherv, Kind::gatherv, Kind::scatterv})
                for (dp_dtype_t dtype : {DP_UINT8, DP_FLOAT64})
                    for (size_t max_count : {size_t(5), size_t(3000)})
                        for (int root : {0, p - 1}) {
                            if (root == p - 1 && (p == 1 || k == Kind::allgatherv)) continue;
                            for (bool in_place : {false, true}) {
                                const Blocks b = make_blocks(p, max_count, seed);
                                const std::string where =
                                    std::string(kind_name(k)) + " " + name(memory) + " p " +
                                    std::to_string(p) + " " + dp_dtype_name(dtype) + " max " +
                                    std::to_string(max_count) + " root " + std::to_string(root) +
                                    (in_place ? " in place" : "") + " seed " +
                                    std::to_string(seed);
                                const Outcome o =
                                    run(team, k, b, dtype, root, in_place, seed++);
                                for (int m = 0; m < p; ++m)
                                    ASSERT_EQ(o.status[size_t(m)], DP_OK) << where << " rank " << m;
                                expect_exact(k, b, o, dtype, root, in_place, where);
                            }
                        }
        }
}

void VectorGatherTest::disagreeing_gathers() {
    for (Memory memory : kAllMemory) {
        SCOPED_TRACE(name(memory));
        Team team(agent, 3, key(), memory);
        join_as_set(team);
        for (Kind k : {Kind::allgatherv, Kind::gatherv, Kind::scatterv}) {
            SCOPED_TRACE(kind_name(k));
            Blocks b = make_blocks(3, 100, 7);
            Blocks wrong = b;
            // Member 1 says its block is one element longer than the others
            // (and the gathering side) expect: it passes its own count.
            wrong.counts[1] = b.counts[1] + 1;
            const int p = 3, root = 2;
            std::vector<uint8_t *> src(p), dst(p);
            std::vector<std::vector<uint8_t>> before(p);
            for (int r = 0; r < p; ++r) {
                src[size_t(r)] = team.buffer(r, b.extent * 8 + 64);
                std::memset(src[size_t(r)], 0x11 * (r + 1), b.extent * 8 + 64);
                dst[size_t(r)] = team.buffer(r, b.extent * 8 + 64);
                std::memset(dst[size_t(r)], kUntouched, b.extent * 8 + 64);
            }
            const auto st = team.run([&](int r, dp_request_t **q) {
                // Member 1's own view: its count (and its entry) one more.
                const Blocks &mine = r == 1 ? wrong : b;
                const size_t own = mine.counts[size_t(r)];
                switch (k) {
                    case Kind::allgatherv:
                        return dp_iallgatherv(src[size_t(r)], own, dst[size_t(r)],
                                              mine.counts.data(), b.displs.data(), DP_INT32,
                                              team[r].team, q);
                    case Kind::gatherv:
                        return dp_igatherv(src[size_t(r)], own, dst[size_t(r)], b.counts.data(),
                                           b.displs.data(), DP_INT32, root, team[r].team, q);
                    case Kind::scatterv:
                        return dp_iscatterv(src[size_t(r)], b.counts.data(), b.displs.data(),
                                            dst[size_t(r)], own, DP_INT32, root, team[r].team,
                                            q);
                }
                return DP_ERR_INTERNAL;
            });
            for (int m = 0; m < p; ++m)
                EXPECT_EQ(st[size_t(m)], DP_ERR_MISMATCH) << "rank " << m;
            for (int r = 0; r < p; ++r)
                for (size_t i = 0; i < b.extent * 8 + 64; ++i)
                    ASSERT_EQ(dst[size_t(r)][i], kUntouched) << "rank " << r << " byte " << i;
            // The team goes on.
            const Outcome ok = run(team, k, b, DP_INT32, 0, false, 9);
            for (int m = 0; m < p; ++m) ASSERT_EQ(ok.status[size_t(m)], DP_OK);
            expect_exact(k, b, ok, DP_INT32, 0, false, "after the mismatch");
        }
    }
}

TEST_F(VectorGatherTest, TheLibraryRefusesWhatItCanTellIsWrongBeforePosting) {
    Team team(agent, 2, key(), Memory::mapped);
    uint8_t *src = team.buffer(0, 4096), *dst = team.buffer(0, 4096);
    dp_team_t *t = team[0].team;
    dp_request_t *req = reinterpret_cast<dp_request_t *>(uintptr_t(1));
    const size_t counts[] = {4, 4}, displs[] = {0, 4}, overlapping[] = {0, 3};
    // Its own count is not its entry.
    EXPECT_EQ(dp_iallgatherv(src, 5, dst, counts, displs, DP_INT32, t, &req), DP_ERR_MISMATCH);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(dp_igatherv(src, 3, dst, counts, displs, DP_INT32, 0, t, &req), DP_ERR_MISMATCH);
    EXPECT_EQ(dp_iscatterv(src, counts, displs, dst, 2, DP_INT32, 0, t, &req), DP_ERR_MISMATCH);
    // Receive blocks that overlap.
    EXPECT_EQ(dp_iallgatherv(src, 4, dst, counts, overlapping, DP_INT32, t, &req),
              DP_ERR_INVALID);
    EXPECT_EQ(dp_igatherv(src, 4, dst, counts, overlapping, DP_INT32, 0, t, &req),
              DP_ERR_INVALID);
    // The root's arrays missing at the root; a root out of range; a NULL
    // destination with something to receive.
    EXPECT_EQ(dp_igatherv(src, 4, dst, nullptr, displs, DP_INT32, 0, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_iscatterv(src, counts, nullptr, dst, 4, DP_INT32, 0, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_igatherv(src, 4, dst, counts, displs, DP_INT32, 2, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_iscatterv(src, counts, displs, dst, 4, DP_INT32, -1, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_iallgatherv(src, 4, nullptr, counts, displs, DP_INT32, t, &req),
              DP_ERR_INVALID);
    EXPECT_EQ(dp_iallgatherv(src, 4, dst, counts, displs, dp_dtype_t(99), t, &req),
              DP_ERR_INVALID);
    EXPECT_EQ(req, nullptr);
}

// reduce_scatterv: member m's block of counts[m] elements (some 0), every
// member's source the blocks back to back; each result the rank-order
// reduction (the mover's kernels, checked against the scalar reference in
// tests/mover), the destination's guards untouched.
struct ScatterRun {
    std::vector<uint8_t *> src, dst;
    std::vector<dp_status_t> status;
};
ScatterRun run_reduce_scatterv(Team &team, const std::vector<size_t> &counts, dp_dtype_t dtype,
                               uint32_t seed, const std::vector<size_t> *counts_of_1 = nullptr) {
    const int p = team.size();
    const size_t e = dp_dtype_size(dtype);
    size_t total = 0;
    for (size_t c : counts) total += c;
    ScatterRun out;
    out.src.resize(size_t(p));
    out.dst.resize(size_t(p));
    for (int r = 0; r < p; ++r) {
        out.src[size_t(r)] = team.buffer(r, total * e + 16);
        deputy::testing::fill(out.src[size_t(r)], total * e, seed + uint32_t(r), dtype);
        uint8_t *whole = team.buffer(r, counts[size_t(r)] * e + 2 * kGuard);
        std::memset(whole, kUntouched, counts[size_t(r)] * e + 2 * kGuard);
        out.dst[size_t(r)] = whole + kGuard;
    }
    out.status = team.run([&](int r, dp_request_t **q) {
        const std::vector<size_t> &mine = r == 1 && counts_of_1 ? *counts_of_1 : counts;
        return dp_ireduce_scatterv(out.src[size_t(r)], out.dst[size_t(r)], mine.data(), dtype,
                                   DP_SUM, team[r].team, q);
    });
    return out;
}

void expect_reduced(const std::vector<size_t> &counts, const ScatterRun &o, dp_dtype_t dtype,
                    const std::string &where) {
    const int p = int(counts.size());
    const size_t e = dp_dtype_size(dtype);
    size_t at = 0;
    for (int r = 0; r < p; ++r) {
        std::vector<const uint8_t *> blocks;
        for (int m = 0; m < p; ++m) blocks.push_back(o.src[size_t(m)] + at * e);
        std::vector<uint8_t> want(counts[size_t(r)] * e + 2 * kGuard, kUntouched);
        if (counts[size_t(r)]) {
            const auto reduced = deputy::testing::reduce_ref(blocks, counts[size_t(r)], dtype, DP_SUM);
            std::memcpy(want.data() + kGuard, reduced.data(), reduced.size());
        }
        ASSERT_EQ(std::memcmp(o.dst[size_t(r)] - kGuard, want.data(), want.size()), 0)
            << where << " rank " << r;
        at += counts[size_t(r)];
    }
}

void VectorGatherTest::uneven_reduce_scatterv() {
    uint32_t seed = 1;
    for (Memory memory : kAllMemory)
        for (int p : {1, 2, 3, 4}) {
            Team team(agent, p, key(), memory);
            join_as_set(team);
            const deputy::testing::AgentPaused paused(agent, members_only(memory));
            for (dp_dtype_t dtype : {DP_INT32, DP_FLOAT64})
                for (size_t max_count : {size_t(5), size_t(3000)}) {
                    const Blocks b = make_blocks(p, max_count, seed);
                    const std::string where = std::string(name(memory)) + " p " +
                                              std::to_string(p) + " " + dp_dtype_name(dtype) +
                                              " max " + std::to_string(max_count);
                    const ScatterRun o = run_reduce_scatterv(team, b.counts, dtype, seed++);
                    for (int m = 0; m < p; ++m)
                        ASSERT_EQ(o.status[size_t(m)], DP_OK) << where << " rank " << m;
                    expect_reduced(b.counts, o, dtype, where);
                }
        }
}

void VectorGatherTest::disagreeing_reduce_scatterv() {
    for (Memory memory : kAllMemory) {
        SCOPED_TRACE(name(memory));
        Team team(agent, 3, key(), memory);
        join_as_set(team);
        const std::vector<size_t> counts{5, 7, 3};
        std::vector<size_t> other = counts;
        other[0] = 6;  // member 1 believes block 0 is longer
        const ScatterRun bad = run_reduce_scatterv(team, counts, DP_INT32, 3, &other);
        for (int m = 0; m < 3; ++m) EXPECT_EQ(bad.status[size_t(m)], DP_ERR_MISMATCH) << m;
        for (int r = 0; r < 3; ++r)
            for (size_t i = 0; i < counts[size_t(r)] * 4; ++i)
                ASSERT_EQ(bad.dst[size_t(r)][i], kUntouched) << "rank " << r << " byte " << i;
        const ScatterRun ok = run_reduce_scatterv(team, counts, DP_INT32, 4);
        for (int m = 0; m < 3; ++m) ASSERT_EQ(ok.status[size_t(m)], DP_OK);
        expect_reduced(counts, ok, DP_INT32, "after the mismatch");
    }
}

TEST_F(VectorGatherTest, UnevenCountsWithGapsAreBitExactInEveryMemoryMode) {
    both_ways([&] { uneven_gathers(); });
}
TEST_F(VectorGatherTest, BlocksThatDisagreeFailEveryMemberAndWriteNothing) {
    both_ways([&] { disagreeing_gathers(); });
}
TEST_F(VectorGatherTest, ReduceScattervWithUnevenCountsInEveryMemoryMode) {
    both_ways([&] { uneven_reduce_scatterv(); });
}
TEST_F(VectorGatherTest, ReduceScattervCountsThatDisagreeFailEveryMember) {
    both_ways([&] { disagreeing_reduce_scatterv(); });
}

TEST_F(VectorGatherTest, ReduceScattervRefusesWhatTheLibraryCanTellAlone) {
    Team team(agent, 2, key(), Memory::mapped);
    uint8_t *buf = team.buffer(0, 4096);
    dp_request_t *req = nullptr;
    const size_t counts[] = {4, 4};
    EXPECT_EQ(dp_ireduce_scatterv(buf, buf, counts, DP_INT32, DP_SUM, team[0].team, &req),
              DP_ERR_INVALID);  // no in-place form
    EXPECT_EQ(dp_ireduce_scatterv(buf, buf + 64, nullptr, DP_INT32, DP_SUM, team[0].team, &req),
              DP_ERR_INVALID);
    EXPECT_EQ(dp_ireduce_scatterv(buf, buf + 64, counts, DP_FLOAT32, DP_BAND, team[0].team, &req),
              DP_ERR_INVALID);
    EXPECT_EQ(req, nullptr);
}

}  // namespace
