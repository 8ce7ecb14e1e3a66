// The mpirun options that bind ranks to a layout's slots, on synthetic
// topologies: Open MPI's logical core and PU numbers, Hydra's OS numbers
// repeated up to the number of ranks.
#include "cli/launch/mpi_binding.h"

#include <gtest/gtest.h>

namespace {

using deputy::AgentCores;
using deputy::Placement;
using deputy::Topology;
using deputy::launch::MpiFlavor;
using Args = std::vector<std::string>;

struct Layout {
    Topology topology;
    Placement placement;
};

Layout layout(const std::string &topology, const std::string &agent_cores) {
    Layout l;
    std::string error;
    EXPECT_EQ(deputy::load_synthetic_topology(topology, &l.topology, &error), DP_OK) << error;
    AgentCores request;
    EXPECT_EQ(deputy::parse_agent_cores(agent_cores, "--agent-cores", &request, &error), DP_OK);
    EXPECT_EQ(deputy::compute_placement(l.topology, request, "--agent-cores", &l.placement, &error),
              DP_OK)
        << error;
    return l;
}

Args options(MpiFlavor flavor, const Layout &l, int ranks = 0) {
    return deputy::launch::mpi_binding_options(flavor, l.topology, l.placement, ranks);
}

const char *kLinuxSmt = "package:2 core:4 pu:2(indexes=2*8:1*2)";

TEST(MpiBinding, SharedBindsNothing) {
    Layout l = layout(kLinuxSmt, "shared");
    EXPECT_TRUE(options(MpiFlavor::kOpenMpi, l).empty());
    EXPECT_TRUE(options(MpiFlavor::kHydra, l, 4).empty());
}

TEST(MpiBinding, OpenMpiWholeCoresByLogicalIndex) {
    EXPECT_EQ(options(MpiFlavor::kOpenMpi, layout(kLinuxSmt, "last")),
              (Args{"--cpu-set", "0-2,4-6", "--bind-to", "core:overload-allowed"}));
    EXPECT_EQ(options(MpiFlavor::kOpenMpi, layout("package:1 core:2 pu:1", "last")),
              (Args{"--cpu-set", "0", "--bind-to", "core:overload-allowed"}));
}

TEST(MpiBinding, OpenMpiRanksSharingASlotYieldWhileTheyWait) {
    auto sharing = [](MpiFlavor flavor, const Layout &l, int ranks) {
        return deputy::launch::mpi_shared_slot_options(flavor, l.placement, ranks);
    };
    const Layout two_cores = layout("package:1 core:2 pu:1", "last");
    EXPECT_EQ(sharing(MpiFlavor::kOpenMpi, two_cores, 1), Args{});
    EXPECT_EQ(sharing(MpiFlavor::kOpenMpi, two_cores, 2),
              (Args{"--mca", "mpi_yield_when_idle", "1"}));
    EXPECT_EQ(sharing(MpiFlavor::kOpenMpi, two_cores, 0), Args{});  // ranks unknown
    EXPECT_EQ(sharing(MpiFlavor::kHydra, two_cores, 2), Args{});
    EXPECT_EQ(sharing(MpiFlavor::kOpenMpi, layout("package:1 core:2 pu:1", "shared"), 8), Args{});
    // 6 slots (3 cores per package) for 6 ranks: nobody shares.
    EXPECT_EQ(sharing(MpiFlavor::kOpenMpi, layout(kLinuxSmt, "last"), 6), Args{});
    EXPECT_EQ(sharing(MpiFlavor::kOpenMpi, layout(kLinuxSmt, "last"), 7),
              (Args{"--mca", "mpi_yield_when_idle", "1"}));
}

TEST(MpiBinding, OpenMpiHardwareThreadsWhenASlotIsPartOfACore) {
    EXPECT_EQ(options(MpiFlavor::kOpenMpi, layout(kLinuxSmt, "smt")),
              (Args{"--use-hwthread-cpus", "--cpu-set", "0,2,4,6,8,10,12,14", "--bind-to",
                    "hwthread:overload-allowed"}));
    // cpus:3 leaves the ranks CPU 11, core 3's second PU (logical PU 7).
    EXPECT_EQ(options(MpiFlavor::kOpenMpi, layout(kLinuxSmt, "cpus:3")),
              (Args{"--use-hwthread-cpus", "--cpu-set", "0-5,7-15", "--bind-to",
                    "hwthread:overload-allowed"}));
}

TEST(MpiBinding, HydraListsOsNumbersUpToTheRanks) {
    const Layout l = layout(kLinuxSmt, "last");
    EXPECT_EQ(options(MpiFlavor::kHydra, l),
              (Args{"-bind-to", "user:0+8,1+9,2+10,4+12,5+13,6+14"}));
    EXPECT_EQ(options(MpiFlavor::kHydra, l, 2),
              (Args{"-bind-to", "user:0+8,1+9,2+10,4+12,5+13,6+14"}));
    EXPECT_EQ(options(MpiFlavor::kHydra, l, 8),
              (Args{"-bind-to", "user:0+8,1+9,2+10,4+12,5+13,6+14,0+8,1+9"}));
    EXPECT_EQ(options(MpiFlavor::kHydra, layout(kLinuxSmt, "smt"), 3),
              (Args{"-bind-to", "user:0,1,2,3,4,5,6,7"}));
}

}  // namespace
