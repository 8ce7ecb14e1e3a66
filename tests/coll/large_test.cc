// Sizes the agent will really see: megabyte vectors run end to end with the
// selector's default chunk, and gigabyte schedules built (not run) quickly —
// the builder's dependency tracking must stay near linear in the number of
// pieces, since the agent builds a schedule per call.
#include <gtest/gtest.h>

#include <chrono>

#include "coll/selector.h"
#include "harness.h"

namespace deputy::test {
namespace {

TEST(LargeTest, MegabyteCollectivesWithTheDefaultChunk) {
    const size_t chunk = coll::SelectorTunables{}.chunk_bytes;
    struct Run {
        const char *algorithm;
        int size;
        size_t count;
    };
    uint64_t seed = 900;
    for (const Run &r :
         {Run{"allreduce_ring", 5, (1u << 20) + 3}, Run{"allreduce_rabenseifner", 6, 1u << 20},
          Run{"reduce_scatter_ring", 3, 300001}, Run{"allgather_ring", 7, 100003},
          Run{"alltoall_pairwise", 4, 65537}, Run{"bcast_chain", 8, (1u << 20) + 1},
          Run{"bcast_binomial", 7, 1u << 20}}) {
        Case c;
        for (const coll::Algorithm &a : coll::all_algorithms()) {
            if (std::string_view(r.algorithm) == a.full_name) c.algorithm = &a;
        }
        ASSERT_NE(c.algorithm, nullptr) << r.algorithm;
        c.size = r.size;
        c.count = r.count;
        c.dtype = DP_INT32;
        c.chunk_bytes = c.algorithm->pipelines ? chunk : 0;
        c.seed = seed++;
        EXPECT_TRUE(run_case(c));
    }
}

TEST(LargeTest, BuildingGigabyteSchedulesIsFast) {
    coll::CollectiveArgs a;
    a.collective = coll::Collective::allreduce;
    a.size = 8;
    a.count = size_t{1} << 28;  // 1 GiB of float32
    a.dtype = DP_FLOAT32;
    a.chunk_bytes = 64 * 1024;
    const auto start = std::chrono::steady_clock::now();
    size_t steps = 0;
    for (const char *name : {"ring", "rabenseifner"}) {
        coll::Schedule s;
        ASSERT_EQ(coll::build_schedule(*coll::find_algorithm(a.collective, name), a, &s), DP_OK);
        std::string error;
        ASSERT_EQ(coll::check_schedule(s, &error), DP_OK) << error;
        steps += s.steps.size();
    }
    a.collective = coll::Collective::bcast;
    coll::Schedule chain;
    ASSERT_EQ(coll::build_schedule(*coll::find_algorithm(a.collective, "chain"), a, &chain), DP_OK);
    steps += chain.steps.size();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GT(steps, 100000u);
    EXPECT_LT(seconds, 5.0) << steps << " steps";
    RecordProperty("steps", static_cast<int>(steps));
    RecordProperty("build_ms", static_cast<int>(seconds * 1000));
}

}  // namespace
}  // namespace deputy::test
