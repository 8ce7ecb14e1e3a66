// Arguments, buffer sizes, the algorithm table and schedule text.
#include <gtest/gtest.h>

#include <set>

#include "coll/algorithms.h"
#include "coll/collective.h"

namespace deputy::coll {
namespace {

CollectiveArgs args(Collective c, int rank = 0, int size = 4, size_t count = 10) {
    CollectiveArgs a;
    a.collective = c;
    a.rank = rank;
    a.size = size;
    a.count = count;
    a.dtype = DP_FLOAT64;
    return a;
}

TEST(CollectiveArgsTest, RejectsOutOfDomain) {
    EXPECT_EQ(check_args(args(Collective::allreduce)), DP_OK);
    EXPECT_EQ(check_args(args(Collective::allreduce, 0, 0)), DP_ERR_INVALID);
    EXPECT_EQ(check_args(args(Collective::allreduce, -1)), DP_ERR_INVALID);
    EXPECT_EQ(check_args(args(Collective::allreduce, 4, 4)), DP_ERR_INVALID);
    CollectiveArgs a = args(Collective::allreduce);
    a.dtype = DP_DTYPE_COUNT;
    EXPECT_EQ(check_args(a), DP_ERR_INVALID);
    a = args(Collective::reduce_scatter);
    a.op = DP_OP_COUNT;
    EXPECT_EQ(check_args(a), DP_ERR_INVALID);
    a.collective = Collective::allgather;  // op is not used there
    EXPECT_EQ(check_args(a), DP_OK);
    a = args(Collective::bcast);
    a.root = 4;
    EXPECT_EQ(check_args(a), DP_ERR_INVALID);
    a.collective = Collective::alltoall;  // nor root here
    EXPECT_EQ(check_args(a), DP_OK);
    a = args(Collective::alltoall, 0, 4, SIZE_MAX / 8);
    EXPECT_EQ(check_args(a), DP_ERR_TOO_LARGE);
    a.count = SIZE_MAX / 64;
    EXPECT_EQ(check_args(a), DP_ERR_TOO_LARGE);
    a.collective = static_cast<Collective>(kCollectiveCount);
    a.count = 1;
    EXPECT_EQ(check_args(a), DP_ERR_INVALID);
}

TEST(CollectiveArgsTest, BufferSizes) {
    struct Row {
        Collective c;
        size_t source, destination, in_place_destination;
    };
    const size_t n = 80;  // 10 float64
    for (const Row &row :
         {Row{Collective::allreduce, n, n, n}, Row{Collective::reduce_scatter, 4 * n, n, 4 * n},
          Row{Collective::allgather, n, 4 * n, 4 * n},
          Row{Collective::alltoall, 4 * n, 4 * n, 4 * n}, Row{Collective::bcast, 0, n, n},
          Row{Collective::barrier, 0, 0, 0}}) {
        CollectiveArgs a = args(row.c);
        EXPECT_EQ(source_bytes(a), row.source) << collective_name(row.c);
        EXPECT_EQ(destination_bytes(a), row.destination) << collective_name(row.c);
        a.in_place = true;
        EXPECT_EQ(source_bytes(a), 0u) << collective_name(row.c);
        EXPECT_EQ(destination_bytes(a), row.in_place_destination) << collective_name(row.c);
    }
}

TEST(CollectiveArgsTest, Names) {
    for (int i = 0; i < kCollectiveCount; ++i) {
        const auto c = static_cast<Collective>(i);
        EXPECT_EQ(collective_from_name(collective_name(c)), c);
    }
    EXPECT_FALSE(collective_from_name("reduce_all"));
    EXPECT_STREQ(buffer_name(BufferId::scratch), "scratch");
    EXPECT_STREQ(step_kind_name(StepKind::reduce), "reduce");
}

TEST(AlgorithmTableTest, NamesAreUniqueAndFindable) {
    std::set<std::string> full;
    int per_collective[kCollectiveCount] = {};
    for (const Algorithm &a : all_algorithms()) {
        EXPECT_TRUE(full.insert(a.full_name).second) << a.full_name;
        EXPECT_EQ(std::string(a.full_name),
                  std::string(collective_name(a.collective)) + "_" + a.name);
        EXPECT_EQ(find_algorithm(a.collective, a.name), &a);
        EXPECT_EQ(find_algorithm(a.collective, a.full_name), &a);
        ++per_collective[static_cast<int>(a.collective)];
    }
    // Every collective the table says has schedules has one, and none
    // other (the vector ones, alltoallv, cannot: CollectiveArgs holds one
    // count, not one per peer).
    for (int c = 0; c < kCollectiveCount; ++c) {
        EXPECT_FALSE(is_vector(Collective(c)) && has_schedule(Collective(c))) << c;
        if (!has_schedule(Collective(c))) EXPECT_EQ(per_collective[c], 0) << c;
        else EXPECT_GE(per_collective[c], 1) << c;
    }
    EXPECT_EQ(find_algorithm(Collective::allreduce, "bruck"), nullptr);
    EXPECT_EQ(find_algorithm(Collective::alltoall, "allreduce_ring"), nullptr);
}

TEST(AlgorithmTableTest, BuildScheduleChecksFirst) {
    const Algorithm *ring = find_algorithm(Collective::allreduce, "ring");
    Schedule s;
    EXPECT_EQ(build_schedule(*ring, args(Collective::allgather), &s), DP_ERR_INVALID);
    EXPECT_EQ(build_schedule(*ring, args(Collective::allreduce), nullptr), DP_ERR_INVALID);
    EXPECT_EQ(build_schedule(*ring, args(Collective::allreduce, 5), &s), DP_ERR_INVALID);
    ASSERT_EQ(build_schedule(*ring, args(Collective::allreduce, 1), &s), DP_OK);
    EXPECT_STREQ(s.algorithm, "allreduce_ring");
    EXPECT_EQ(s.rank, 1);
    EXPECT_EQ(s.size, 4);
}

TEST(ScheduleTextTest, DescribesEveryStep) {
    CollectiveArgs a = args(Collective::allreduce, 0, 2, 4);
    a.dtype = DP_INT32;
    Schedule s;
    ASSERT_EQ(build_schedule(*find_algorithm(Collective::allreduce, "ring"), a, &s), DP_OK);
    const std::string text = describe(s);
    EXPECT_NE(text.find("allreduce_ring rank 0/2: 5 steps, buffers source=16 destination=16 "
                        "scratch=8"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("#0 send peer=1 tag=0 src=source[0,+8)"), std::string::npos) << text;
    EXPECT_NE(text.find("#2 reduce int32 sum dst=destination[8,+8) a=source[8,+8) "
                        "b=scratch[0,+8) after 1"),
              std::string::npos)
        << text;
}

}  // namespace
}  // namespace deputy::coll
