// `--domain pcie`: the tree hwloc reads from hand-written topologies
// (tests/rail/topologies), the grouping rule on it, and its errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/rail/pcie_groups.h"
#include "bench/rail/rail_error.h"
#include "rail/error_of.h"

namespace deputy::rail {
namespace {

const std::string kTopologies = DEPUTY_RAIL_TOPOLOGIES;
const std::vector<std::string> kVerbs = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};

IoTree two_gpus() { return load_io_tree_xml(kTopologies + "/two_gpus_four_nics.xml"); }

TEST(PcieGroups, ReadsGpusAndNicsButNotTheBmcsVga) {
    IoTree tree = two_gpus();
    ASSERT_TRUE(tree.anchors_are_gpus);
    ASSERT_EQ(tree.anchors.size(), 2u);  // card0 is a VGA controller: not a GPU
    EXPECT_EQ(tree.anchors[0].name, "GPU 0000:01:00.0 (card1)");
    EXPECT_EQ(tree.anchors[1].name, "GPU 0000:81:00.0 (card2)");
    std::vector<std::string> nics;
    for (const TreeNode &n : tree.nics) nics.push_back(n.name);
    EXPECT_EQ(nics, (std::vector<std::string>{"ib0", "mlx5_0", "ib1", "mlx5_1", "ib2", "mlx5_2",
                                              "ib3", "mlx5_3"}));
    // GPU0 -> switch A -> mlx5_0's PCI device; -> host bridge -> switch B ->
    // mlx5_1; -> package 0 -> machine -> package 1 -> ... -> mlx5_2.
    EXPECT_EQ(tree_hops(tree.anchors[0], tree.nics[1]), 2);
    EXPECT_EQ(tree_hops(tree.anchors[0], tree.nics[3]), 4);
    EXPECT_EQ(tree_hops(tree.anchors[0], tree.nics[5]), 8);
    EXPECT_EQ(tree_hops(tree.anchors[1], tree.nics[7]), 2);
}

TEST(PcieGroups, EachGpuTakesTheNicsBehindItsSwitchFirst) {
    auto groups = group_by_pcie(two_gpus(), 2, 2, kVerbs);
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0].anchor, "GPU 0000:01:00.0 (card1)");
    EXPECT_EQ(groups[0].domains, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
    EXPECT_EQ(groups[0].hops, (std::vector<int>{2, 4}));
    EXPECT_EQ(groups[1].domains, (std::vector<std::string>{"mlx5_2", "mlx5_3"}));
    EXPECT_EQ(groups[1].hops, (std::vector<int>{2, 2}));
    EXPECT_EQ(domain_list(groups), "mlx5_0,mlx5_1,mlx5_2,mlx5_3");
    EXPECT_EQ(describe(groups)[0],
              "device 0 = GPU 0000:01:00.0 (card1): mlx5_0 (2 hops), mlx5_1 (4 hops)");
    const auto j = to_json(groups);
    EXPECT_EQ(j[1]["anchor"], "GPU 0000:81:00.0 (card2)");
    EXPECT_EQ(j[1]["domains"][1], "mlx5_3");
    EXPECT_EQ(j[0]["hops"][1], 4);
}

TEST(PcieGroups, RoundsKeepADeviceFromTakingTheNextOnesNic) {
    // One rail per device: GPU1 keeps its own mlx5_2 although GPU0 went first.
    auto one = group_by_pcie(two_gpus(), 2, 1, kVerbs);
    EXPECT_EQ(domain_list(one), "mlx5_0,mlx5_2");
    // Four rails per device over four NICs: every NIC once, then the
    // nearest again.
    auto four = group_by_pcie(two_gpus(), 2, 4, kVerbs);
    EXPECT_EQ(four[0].domains, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_0", "mlx5_1"}));
    EXPECT_EQ(four[1].domains, (std::vector<std::string>{"mlx5_2", "mlx5_3", "mlx5_2", "mlx5_3"}));
}

TEST(PcieGroups, OnlyTheProvidersDomainsCount) {
    // tcp names the interfaces; efa appends a suffix after '-'.
    auto tcp = group_by_pcie(two_gpus(), 2, 1, {"lo", "ib3", "ib0"});
    EXPECT_EQ(domain_list(tcp), "ib0,ib3");
    auto efa = group_by_pcie(two_gpus(), 1, 2, {"mlx5_1-rdm", "mlx5_3-rdm"});
    EXPECT_EQ(efa[0].domains, (std::vector<std::string>{"mlx5_1-rdm", "mlx5_3-rdm"}));
    EXPECT_EQ(efa[0].hops, (std::vector<int>{4, 8}));
    // "mlx5_10" is not mlx5_1 followed by a suffix.
    EXPECT_EQ(error_of([] { group_by_pcie(two_gpus(), 1, 1, {"mlx5_10", "lo"}); }),
              "--domain pcie: none of the provider's domains (mlx5_10, lo) is a NIC in " +
                  kTopologies +
                  "/two_gpus_four_nics.xml (its NICs: ib0, mlx5_0, ib1, mlx5_1, ib2, mlx5_2, "
                  "ib3, mlx5_3)");
}

TEST(PcieGroups, MoreDevicesThanGpusIsAnError) {
    EXPECT_EQ(error_of([] { group_by_pcie(two_gpus(), 3, 1, kVerbs); }),
              "--domain pcie: --devices is 3 but " + kTopologies +
                  "/two_gpus_four_nics.xml has 2 GPU(s) (GPU 0000:01:00.0 (card1), GPU "
                  "0000:81:00.0 (card2))");
}

TEST(PcieGroups, WithoutGpusDevicesStandForPackages) {
    IoTree tree = two_gpus();
    tree.anchors.clear();
    tree.anchors_are_gpus = false;
    // What read_tree makes of a machine without GPUs, from the same file's
    // packages (gp_index 2 and 8 under the machine, 1).
    tree.anchors.push_back({"package 0", {1, 2}});
    tree.anchors.push_back({"package 1", {1, 8}});
    auto groups = group_by_pcie(tree, 3, 1, kVerbs);
    EXPECT_EQ(groups[0].anchor, "package 0");
    EXPECT_EQ(groups[1].anchor, "package 1");
    EXPECT_EQ(groups[2].anchor, "package 0");  // round-robin, no error
    EXPECT_EQ(domain_list(groups), "mlx5_0,mlx5_2,mlx5_1");
    EXPECT_EQ(groups[0].hops[0], 3);  // package -> host bridge -> switch A -> mlx5_0
}

TEST(PcieGroups, ThisMachineAndABadFileAreNamed) {
    // This machine reads (whatever it holds), a missing file is named.
    IoTree here = load_io_tree();
    EXPECT_FALSE(here.anchors.empty());
    EXPECT_EQ(error_of([] { load_io_tree_xml("/nonexistent/node.xml"); }),
              "--domain pcie: hwloc cannot read the topology file '/nonexistent/node.xml'");
}

}  // namespace
}  // namespace deputy::rail
