// The selector's rules at their thresholds, overrides by name, tunables by
// name, and that whatever it picks runs correctly.
#include "coll/selector.h"

#include <gtest/gtest.h>

#include "harness.h"

namespace deputy::coll {
namespace {

CollectiveArgs shape(Collective c, int size, size_t bytes) {
    CollectiveArgs a;
    a.collective = c;
    a.size = size;
    a.count = bytes;  // uint8: count == bytes
    a.dtype = DP_UINT8;
    return a;
}

std::string pick(Collective c, int size, size_t bytes, const SelectorConfig &config = {}) {
    return select_algorithm(shape(c, size, bytes), config).algorithm->name;
}

TEST(SelectorTest, AllreduceBySizeAndTeamShape) {
    const SelectorTunables t;
    EXPECT_EQ(pick(Collective::allreduce, 8, 0), "recursive_doubling");
    EXPECT_EQ(pick(Collective::allreduce, 8, t.allreduce_small_bytes - 1), "recursive_doubling");
    EXPECT_EQ(pick(Collective::allreduce, 8, t.allreduce_small_bytes), "rabenseifner");
    EXPECT_EQ(pick(Collective::allreduce, 6, t.allreduce_ring_bytes - 1), "rabenseifner");
    EXPECT_EQ(pick(Collective::allreduce, 6, t.allreduce_ring_bytes), "ring");
    EXPECT_EQ(pick(Collective::allreduce, 8, t.allreduce_ring_bytes), "rabenseifner");
    EXPECT_EQ(pick(Collective::reduce_scatter, 5, 1), "ring");
}

TEST(SelectorTest, OtherCollectives) {
    const SelectorTunables t;
    EXPECT_EQ(pick(Collective::allgather, 4, t.allgather_small_bytes / 4 - 1),
              "recursive_doubling");
    EXPECT_EQ(pick(Collective::allgather, 4, t.allgather_small_bytes / 4), "ring");
    EXPECT_EQ(pick(Collective::alltoall, 8, t.alltoall_bruck_bytes), "bruck");
    EXPECT_EQ(pick(Collective::alltoall, 8, t.alltoall_bruck_bytes + 1), "pairwise");
    EXPECT_EQ(pick(Collective::alltoall, 7, 1), "pairwise");
    EXPECT_EQ(pick(Collective::bcast, 3, t.bcast_chain_bytes), "chain");
    EXPECT_EQ(pick(Collective::bcast, 3, t.bcast_chain_bytes - 1), "binomial");
    EXPECT_EQ(pick(Collective::bcast, 2, t.bcast_chain_bytes), "binomial");
    EXPECT_EQ(pick(Collective::barrier, 5, 0), "dissemination");
}

TEST(SelectorTest, ChunkOnlyForPipeliningAlgorithms) {
    const SelectorConfig config;
    const Selection ring = select_algorithm(shape(Collective::allreduce, 6, 1 << 22), config);
    EXPECT_EQ(ring.chunk_bytes, config.tunables.chunk_bytes);
    const Selection a2a = select_algorithm(shape(Collective::alltoall, 6, 1 << 22), config);
    EXPECT_EQ(a2a.chunk_bytes, 0u);
}

TEST(SelectorTest, OverridesByName) {
    SelectorConfig config;
    std::string error;
    ASSERT_EQ(set_overrides(config, "allreduce=ring, bcast = bcast_chain", &error), DP_OK) << error;
    EXPECT_EQ(pick(Collective::allreduce, 8, 8, config), "ring");
    EXPECT_EQ(pick(Collective::bcast, 2, 8, config), "chain");
    EXPECT_EQ(pick(Collective::alltoall, 8, 8, config), "bruck");  // untouched
    ASSERT_EQ(set_overrides(config, "allreduce=auto", &error), DP_OK);
    EXPECT_EQ(pick(Collective::allreduce, 8, 8, config), "recursive_doubling");
    EXPECT_EQ(pick(Collective::bcast, 2, 8, config), "chain");
}

TEST(SelectorTest, BadOverridesChangeNothing) {
    SelectorConfig config;
    std::string error;
    ASSERT_EQ(set_overrides(config, "allgather=ring", &error), DP_OK);
    EXPECT_EQ(set_overrides(config, "allgather=auto,allreduce=bruck", &error), DP_ERR_INVALID);
    EXPECT_NE(error.find("allreduce has auto, ring, recursive_doubling, rabenseifner"),
              std::string::npos)
        << error;
    EXPECT_EQ(pick(Collective::allgather, 2, 1, config), "ring");  // the first item was not applied
    EXPECT_EQ(set_overrides(config, "reduce_all=ring", &error), DP_ERR_INVALID);
    EXPECT_NE(error.find("unknown collective"), std::string::npos) << error;
    EXPECT_EQ(set_overrides(config, "allreduce", &error), DP_ERR_INVALID);
    EXPECT_NE(error.find("collective=algorithm"), std::string::npos) << error;
    EXPECT_EQ(set_overrides(config, "", &error), DP_OK);
}

TEST(SelectorTest, TunablesByName) {
    SelectorConfig config;
    ASSERT_EQ(set_tunable(config.tunables, "allreduce_small_bytes", 0), DP_OK);
    EXPECT_EQ(pick(Collective::allreduce, 8, 0, config), "rabenseifner");
    ASSERT_EQ(set_tunable(config.tunables, "chunk_bytes", 4096), DP_OK);
    EXPECT_EQ(config.tunables.chunk_bytes, 4096u);
    for (const char *name :
         {"allreduce_ring_bytes", "allgather_small_bytes", "alltoall_bruck_bytes",
          "alltoall_bruck_min_team", "bcast_chain_bytes"}) {
        EXPECT_EQ(set_tunable(config.tunables, name, 1), DP_OK) << name;
    }
    EXPECT_EQ(set_tunable(config.tunables, "chunk", 1), DP_ERR_INVALID);
}

// Small tunables so that the selector's every branch is taken with small data.
TEST(SelectorTest, WhatItPicksRunsCorrectly) {
    SelectorConfig config;
    config.tunables = {64, 512, 256, 8, 3, 256, 48};
    std::set<std::string> seen;
    uint64_t seed = 500;
    for (int c = 0; c < kCollectiveCount; ++c) {
        for (int size = 1; size <= 8; ++size) {
            for (size_t count : {1, 3, 9, 40, 200}) {
                CollectiveArgs a = shape(static_cast<Collective>(c), size, count * 4);
                a.count = count;
                a.dtype = DP_INT32;
                const Selection s = select_algorithm(a, config);
                // Vector collectives have no schedule (one count per peer),
                // nor those the table says have none yet.
                if (!has_schedule(a.collective)) {
                    ASSERT_EQ(s.algorithm, nullptr) << collective_name(a.collective);
                    continue;
                }
                seen.insert(s.algorithm->full_name);
                test::Case tc;
                tc.algorithm = s.algorithm;
                tc.size = size;
                tc.count = count;
                tc.dtype = DP_INT32;
                tc.chunk_bytes = s.chunk_bytes;
                tc.seed = seed++;
                ASSERT_TRUE(test::run_case(tc));
            }
        }
    }
    EXPECT_EQ(seen.size(), all_algorithms().size());
}

}  // namespace
}  // namespace deputy::coll
