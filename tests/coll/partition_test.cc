// Block layout and the fold: the arithmetic every algorithm stands on.
#include "coll/partition.h"

#include <gtest/gtest.h>

#include "coll/fold.h"

namespace deputy::coll {
namespace {

TEST(BlockPartitionTest, CoversAnyCountContiguouslyLargerBlocksFirst) {
    for (size_t parts = 1; parts <= 9; ++parts) {
        for (size_t count : {0, 1, 2, 7, 8, 9, 100, 1001}) {
            const BlockPartition b(count, parts, 4);
            size_t next = 0;
            for (size_t i = 0; i < parts; ++i) {
                EXPECT_EQ(b.offset(i), next);
                EXPECT_LE(b.elements(i), count / parts + 1);
                EXPECT_GE(b.elements(i), count / parts);
                if (i > 0) {
                    EXPECT_LE(b.elements(i), b.elements(i - 1));
                }
                next += b.bytes(i);
            }
            EXPECT_EQ(next, count * 4);
            EXPECT_EQ(b.bytes(0, parts), count * 4);
            EXPECT_EQ(b.largest_bytes(), b.bytes(0));
        }
    }
}

TEST(BlockPartitionTest, TheRingAllreduceLayout) {
    // 10 elements over 4 ranks: 3 3 2 2, the segment sizes of the classic ring
    // allreduce (the first count % P segments one element longer).
    const BlockPartition b(10, 4, 1);
    EXPECT_EQ(b.elements(0), 3u);
    EXPECT_EQ(b.elements(1), 3u);
    EXPECT_EQ(b.elements(2), 2u);
    EXPECT_EQ(b.elements(3), 2u);
    EXPECT_EQ(b.first_element(3), 8u);
    EXPECT_EQ(b.region(BufferId::destination, 1, 3, 100), destination_region(103, 5));
}

TEST(FoldTest, EveryRankAccountedForExactlyOnce) {
    for (int size = 1; size <= 33; ++size) {
        int p2 = 1;
        while (p2 * 2 <= size) p2 *= 2;
        std::vector<int> covered(static_cast<size_t>(size), 0);
        std::vector<int> members(static_cast<size_t>(p2), -1);
        for (int r = 0; r < size; ++r) {
            const Fold f(r, size);
            EXPECT_EQ(f.p2, p2);
            EXPECT_EQ(f.rem, size - p2);
            if (f.sits_out()) {
                EXPECT_TRUE(f.in_pair());
                EXPECT_EQ(f.pair_partner(), r + 1);
                EXPECT_FALSE(Fold(r + 1, size).sits_out());
                continue;
            }
            ASSERT_GE(f.new_rank, 0);
            ASSERT_LT(f.new_rank, p2);
            EXPECT_EQ(f.member(f.new_rank), r);
            members[static_cast<size_t>(f.new_rank)] = r;
            for (int o = f.first_covered(f.new_rank); o < f.first_covered(f.new_rank + 1); ++o) {
                ++covered[static_cast<size_t>(o)];
            }
        }
        EXPECT_EQ(Fold(0, size).first_covered(p2), size);
        for (int m : members) EXPECT_GE(m, 0);
        for (int c : covered) EXPECT_EQ(c, 1) << "size " << size;
    }
}

TEST(FoldTest, Logarithms) {
    EXPECT_EQ(floor_log2(1), 0);
    EXPECT_EQ(floor_log2(7), 2);
    EXPECT_EQ(floor_log2(8), 3);
    EXPECT_EQ(ceil_log2(1), 0);
    EXPECT_EQ(ceil_log2(5), 3);
    EXPECT_EQ(ceil_log2(8), 3);
}

}  // namespace
}  // namespace deputy::coll
