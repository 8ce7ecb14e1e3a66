// The latency and bandwidth columns of docs/algorithms.md, measured on the
// schedules themselves with the alpha-beta model of cost_model.h, and the
// point of chunk_bytes: pipelined schedules finish sooner.
#include "cost_model.h"

#include <gtest/gtest.h>

#include "coll/fold.h"
#include "harness.h"

namespace deputy::test {
namespace {

std::vector<coll::Schedule> team_for(std::string_view algorithm, int size, size_t count,
                                     size_t chunk_bytes = 0, dp_dtype_t dtype = DP_UINT8) {
    Case c;
    for (const coll::Algorithm &a : coll::all_algorithms()) {
        if (algorithm == a.full_name) c.algorithm = &a;
    }
    EXPECT_NE(c.algorithm, nullptr) << algorithm;
    c.size = size;
    c.count = count;
    c.dtype = dtype;
    c.chunk_bytes = chunk_bytes;
    std::vector<coll::Schedule> team;
    EXPECT_TRUE(build_team(c, team));
    return team;
}

// The docs' "rounds" column: message latencies on the critical path.
int documented_rounds(std::string_view algorithm, int p) {
    const int lo = coll::floor_log2(p);
    const int hi = coll::ceil_log2(p);
    const int fold = p == 1 << lo ? 0 : 2;
    if (algorithm == "allreduce_ring") return 2 * (p - 1);
    if (algorithm == "allreduce_recursive_doubling") return lo + fold;
    if (algorithm == "allreduce_rabenseifner") return 2 * lo + fold;
    if (algorithm == "allgather_recursive_doubling") return lo + fold;
    if (algorithm == "alltoall_bruck" || algorithm == "bcast_binomial" ||
        algorithm == "barrier_dissemination") {
        return hi;
    }
    return p - 1;  // reduce_scatter and allgather ring, alltoall pairwise, bcast chain
}

TEST(CostModelTest, RoundsMatchTheDocs) {
    for (const coll::Algorithm &a : coll::all_algorithms()) {
        for (int p = 1; p <= 8; ++p) {
            // 64 elements: every block of every algorithm is non-empty.
            const double t = makespan(team_for(a.full_name, p, 64), {1, 0, 0});
            EXPECT_EQ(t, documented_rounds(a.full_name, p)) << a.full_name << " P=" << p;
        }
    }
}

// The docs' bandwidth column for powers of two and counts P divides, in
// units of n = the collective's count in bytes (see collective.h).
TEST(CostModelTest, BandwidthTermsMatchTheDocs) {
    const size_t n = 4096;
    for (int p : {2, 4, 8}) {
        const double pd = p;
        const double lg = coll::floor_log2(p);
        const auto time = [&](std::string_view algorithm) {
            return makespan(team_for(algorithm, p, n), {0, 1, 0}) / static_cast<double>(n);
        };
        EXPECT_DOUBLE_EQ(time("allreduce_ring"), 2 * (pd - 1) / pd) << p;
        EXPECT_DOUBLE_EQ(time("allreduce_rabenseifner"), 2 * (pd - 1) / pd) << p;
        EXPECT_DOUBLE_EQ(time("allreduce_recursive_doubling"), lg) << p;
        EXPECT_DOUBLE_EQ(time("reduce_scatter_ring"), pd - 1) << p;
        EXPECT_DOUBLE_EQ(time("allgather_ring"), pd - 1) << p;
        EXPECT_DOUBLE_EQ(time("allgather_recursive_doubling"), pd - 1) << p;
        EXPECT_DOUBLE_EQ(time("alltoall_pairwise"), pd - 1) << p;
        EXPECT_DOUBLE_EQ(time("alltoall_bruck"), pd / 2 * lg) << p;
        EXPECT_DOUBLE_EQ(time("bcast_binomial"), lg) << p;
        EXPECT_DOUBLE_EQ(time("bcast_chain"), pd - 1) << p;
    }
}

TEST(CostModelTest, ChunkedChainApproachesOneTransfer) {
    const size_t n = 1 << 16;
    for (int p : {3, 8}) {
        for (size_t pieces : {4, 16, 64}) {
            const double t = makespan(team_for("bcast_chain", p, n, n / pieces), {0, 1, 0});
            EXPECT_DOUBLE_EQ(t, static_cast<double>(p - 2 + static_cast<int>(pieces)) *
                                    static_cast<double>(n / pieces))
                << "P=" << p << " pieces=" << pieces;
        }
    }
}

TEST(CostModelTest, ChunkingOverlapsReductionWithTransfer) {
    // With reductions as slow as the wire, pieces let a rank reduce one piece
    // while the next arrives. For the ring allreduce whole blocks cost
    // (P-1) (beta + gamma) n/P + (P-1) beta n/P; pieces hide the gamma term,
    // leaving 2/3 of that as the piece count grows. Rabenseifner's halving
    // rounds gain less.
    const CostModel model{0, 1, 1};
    const size_t count = 1 << 14;
    const auto ratio = [&](std::string_view algorithm) {
        return makespan(team_for(algorithm, 4, count, count / 32), model) /
               makespan(team_for(algorithm, 4, count), model);
    };
    EXPECT_LT(ratio("allreduce_ring"), 0.7);
    EXPECT_LT(ratio("reduce_scatter_ring"), 0.6);
    EXPECT_LT(ratio("allreduce_rabenseifner"), 0.95);
}

TEST(CostModelTest, ChunkedBinomialKeepsItsBandwidthTerm) {
    // The root's one port carries ceil(log2 P) copies of the message however
    // it is cut, so pieces cannot beat log2(P) * n: large broadcasts need the
    // chain, which is what the selector picks for them.
    const size_t n = 1 << 14;
    for (size_t piece : {size_t{0}, n / 16}) {
        EXPECT_DOUBLE_EQ(makespan(team_for("bcast_binomial", 8, n, piece), {0, 1, 0}), 3.0 * n);
    }
    EXPECT_LT(makespan(team_for("bcast_chain", 8, n, n / 16), {0, 1, 0}), 1.5 * n);
}

}  // namespace
}  // namespace deputy::test
