// The counts block of alltoallv (coll/vector_counts.h): what the agent
// accepts from a member's copy, and how members' counts are matched.
#include "coll/vector_counts.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace deputy::coll {
namespace {

// A block for `p` entries: scounts, sdispls, rcounts, rdispls.
std::vector<uint64_t> block(const std::vector<size_t> &sc, const std::vector<size_t> &sd,
                            const std::vector<size_t> &rc, const std::vector<size_t> &rd) {
    std::vector<uint64_t> b(vector_counts_bytes(uint32_t(sc.size())) / 8);
    encode_vector_counts(uint32_t(sc.size()), sc.data(), sd.data(), rc.data(), rd.data(), b.data());
    return b;
}

dp_status_t decode(const std::vector<uint64_t> &b, uint32_t p, uint64_t e, MemberVector *out,
                   std::string *why, uint64_t max = 1ull << 36) {
    return decode_vector_counts(b.data(), b.size() * 8, p, e, max, out, why);
}

TEST(VectorCounts, LayoutIsFourArraysOfEntries) {
    const auto b = block({1, 2}, {3, 4}, {5, 6}, {7, 8});
    EXPECT_EQ(b, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
    EXPECT_EQ(vector_counts_bytes(64), 2048u);
}

TEST(VectorCounts, DecodesToByteRangesAndIgnoresTheDisplacementOfEmptyBlocks) {
    const auto b = block({2, 0, 5}, {10, ~size_t(0), 0}, {0, 1, 3}, {0, 4, 7});
    MemberVector v;
    std::string why;
    ASSERT_EQ(decode(b, 3, 4, &v, &why), DP_OK) << why;
    EXPECT_EQ(v.send, (std::vector<VectorBlock>{{40, 8}, {0, 0}, {0, 20}}));
    EXPECT_EQ(v.recv, (std::vector<VectorBlock>{{0, 0}, {16, 4}, {28, 12}}));
    EXPECT_EQ(v.send_total, 28u);
    EXPECT_EQ(v.recv_total, 16u);
    // Unaligned bytes decode the same (a fuzzer's input).
    std::vector<uint8_t> shifted(b.size() * 8 + 1);
    std::memcpy(shifted.data() + 1, b.data(), b.size() * 8);
    MemberVector u;
    ASSERT_EQ(decode_vector_counts(shifted.data() + 1, b.size() * 8, 3, 4, 1ull << 36, &u, &why),
              DP_OK);
    EXPECT_EQ(u.send, v.send);
    EXPECT_EQ(u.recv, v.recv);
}

TEST(VectorCounts, RefusesAWrongLengthOrNoElementSize) {
    const auto b = block({1, 1}, {0, 1}, {1, 1}, {0, 1});
    MemberVector v;
    std::string why;
    EXPECT_EQ(decode(b, 3, 4, &v, &why), DP_ERR_INVALID);  // a team of 3 needs 96 bytes
    EXPECT_NE(why.find("counts block of 64 bytes; a team of 3 needs 96"), std::string::npos) << why;
    EXPECT_EQ(decode_vector_counts(b.data(), 63, 2, 4, 1ull << 36, &v, &why), DP_ERR_INVALID);
    EXPECT_EQ(decode(b, 0, 4, &v, &why), DP_ERR_INVALID);
    EXPECT_EQ(decode(b, 2, 0, &v, &why), DP_ERR_INVALID);
    EXPECT_EQ(decode(b, 2, 4, &v, &why), DP_OK);
}

TEST(VectorCounts, OverflowingRangesAreDeniedNamingTheEntry) {
    const size_t big = size_t(1) << 62;
    MemberVector v;
    std::string why;
    // count x element overflows.
    EXPECT_EQ(decode(block({1, big}, {0, 0}, {1, 1}, {0, 1}), 2, 8, &v, &why), DP_ERR_DENIED);
    EXPECT_NE(why.find("scounts[1]"), std::string::npos) << why;
    // displacement x element overflows.
    EXPECT_EQ(decode(block({1, 1}, {0, 1}, {1, 1}, {big, 1}), 2, 8, &v, &why), DP_ERR_DENIED);
    EXPECT_NE(why.find("rdispls[0]"), std::string::npos) << why;
    // displacement + count overflows though each alone does not.
    EXPECT_EQ(decode(block({1, 1}, {0, 1}, {1, 1}, {0, ~size_t(0) / 2}), 2, 2, &v, &why),
              DP_ERR_DENIED);
    EXPECT_NE(why.find("rdispls[1]"), std::string::npos) << why;
}

TEST(VectorCounts, TotalsAboveTheLimitAreTooLarge) {
    MemberVector v;
    std::string why;
    const auto b = block({600, 500}, {0, 600}, {1, 1}, {0, 1});
    EXPECT_EQ(decode(b, 2, 1, &v, &why, 1100), DP_OK);
    EXPECT_EQ(decode(b, 2, 1, &v, &why, 1099), DP_ERR_TOO_LARGE);
    EXPECT_NE(why.find("send"), std::string::npos) << why;
    // Blocks that would wrap a 64-bit total are refused, not summed.
    const size_t half = size_t(1) << 63;
    EXPECT_EQ(decode(block({half, half}, {0, 0}, {0, 0}, {0, 0}), 2, 1, &v, &why, ~0ull),
              DP_ERR_TOO_LARGE);
}

TEST(VectorCounts, DifferenceNamesTheFirstPairAndSkipsAbsentMembers) {
    // Rank 0 sends 2 to rank 1, which expects 3.
    MemberVector a, b;
    a.send = {{0, 1}, {1, 2}};
    a.recv = {{0, 1}, {1, 4}};
    b.send = {{0, 4}, {4, 5}};
    b.recv = {{0, 3}, {3, 5}};
    std::vector<const MemberVector *> both = {&a, &b};
    EXPECT_EQ(vector_difference(both), "rank 0 sends 2 bytes to rank 1, which expects 3");
    b.recv[0].bytes = 2;
    EXPECT_EQ(vector_difference(both), "");
    // Only pairs whose both members are present (this node's) are compared.
    b.recv[0].bytes = 9;
    std::vector<const MemberVector *> one = {&a, nullptr};
    EXPECT_EQ(vector_difference(one), "");
}

// reduce_scatterv's layout: send blocks back to back from 0 in rank order
// (empty ones anywhere), every receive block [0, +own).
TEST(VectorCounts, ReductionLayoutIsBackToBackBlocksAndOneResult) {
    MemberVector v;
    std::string why;
    ASSERT_EQ(decode(block({2, 0, 3}, {0, 99, 2}, {3, 3, 3}, {0, 0, 0}), 3, 4, &v, &why), DP_OK);
    EXPECT_EQ(reduction_layout_problem(v), "");
    // A gap before block 2.
    ASSERT_EQ(decode(block({2, 0, 3}, {0, 0, 3}, {3, 3, 3}, {0, 0, 0}), 3, 4, &v, &why), DP_OK);
    EXPECT_NE(reduction_layout_problem(v).find("block 2 of the source starts at byte 12, not 8"),
              std::string::npos)
        << reduction_layout_problem(v);
    // Blocks out of rank order (block 1 before block 0).
    ASSERT_EQ(decode(block({2, 3, 0}, {3, 0, 0}, {3, 3, 3}, {0, 0, 0}), 3, 4, &v, &why), DP_OK);
    EXPECT_NE(reduction_layout_problem(v), "");
    // A result block elsewhere, or of another length.
    ASSERT_EQ(decode(block({2, 0, 3}, {0, 0, 2}, {3, 3, 3}, {0, 1, 0}), 3, 4, &v, &why), DP_OK);
    EXPECT_NE(reduction_layout_problem(v).find("from rank 1"), std::string::npos);
    ASSERT_EQ(decode(block({2, 0, 3}, {0, 0, 2}, {3, 3, 2}, {0, 0, 0}), 3, 4, &v, &why), DP_OK);
    EXPECT_NE(reduction_layout_problem(v).find("from rank 2"), std::string::npos);
}

TEST(VectorCounts, ReductionDigestFollowsTheCountsAlone) {
    MemberVector a, b, c;
    std::string why;
    ASSERT_EQ(decode(block({2, 0, 3}, {0, 0, 2}, {2, 2, 2}, {0, 0, 0}), 3, 4, &a, &why), DP_OK);
    ASSERT_EQ(decode(block({2, 0, 3}, {0, 0, 2}, {3, 3, 3}, {0, 0, 0}), 3, 4, &b, &why), DP_OK);
    ASSERT_EQ(decode(block({3, 0, 2}, {0, 0, 3}, {3, 3, 3}, {0, 0, 0}), 3, 4, &c, &why), DP_OK);
    EXPECT_EQ(reduction_layout_digest(a), reduction_layout_digest(b));  // members' own blocks
    EXPECT_NE(reduction_layout_digest(a), reduction_layout_digest(c));  // other counts
}

}  // namespace
}  // namespace deputy::coll
