// `deputy mpirun --dpu-hostfile`: the hosts of the mpirun arguments and the
// DPUs of the DPU hostfile, in order, and which host a rank runs on.
#include "cli/launch/host_list.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

using deputy::launch::match_local_host;
using deputy::launch::read_host_names;
using deputy::launch::read_hostfile;
using Names = std::vector<std::string>;

std::string write_file(const std::string &name, const std::string &text) {
    const std::string path = testing::TempDir() + "/" + name;
    std::ofstream(path) << text;
    return path;
}

TEST(HostList, HostfilesOfEitherMpiGiveTheirNamesInOrderOnce) {
    const std::string open_mpi = write_file(
        "hosts-ompi", "# the hosts\nnode2 slots=4 max_slots=8\n\n  node1 slots=2\nnode2\n");
    const std::string hydra = write_file("hosts-hydra", "node3:2\nnode4  # a comment\n");
    Names names;
    std::string error;
    ASSERT_TRUE(read_host_names({"--hostfile", open_mpi, "--hostfile", hydra}, &names, &error))
        << error;
    EXPECT_EQ(names, (Names{"node2", "node1", "node3", "node4"}));
    ASSERT_TRUE(read_host_names({"--host", "a:2,b,a,10.0.0.7:1"}, &names, &error)) << error;
    EXPECT_EQ(names, (Names{"a", "b", "10.0.0.7"}));
    // An IPv6 address keeps its colons; a name with a non-numeric tail too.
    ASSERT_TRUE(read_host_names({"--host", "fe80::1,x:y"}, &names, &error));
    EXPECT_EQ(names, (Names{"fe80::1", "x:y"}));
    // The shim's form of a list, both ways.
    EXPECT_EQ(deputy::launch::comma_text({"a", "10.0.0.7"}), "a,10.0.0.7");
    EXPECT_EQ(deputy::launch::comma_names("a,10.0.0.7"), (Names{"a", "10.0.0.7"}));
}

TEST(HostList, ADpuHostfileKeepsEveryLineSinceLineIPairsWithHostI) {
    const std::string dpus = write_file("dpus", "dpu0\ndpu0 slots=1\n# gone\ndpu1\n");
    Names names;
    std::string error;
    ASSERT_TRUE(read_hostfile(dpus, false, &names, &error)) << error;
    EXPECT_EQ(names, (Names{"dpu0", "dpu0", "dpu1"}));
    EXPECT_FALSE(read_hostfile(testing::TempDir() + "/no-such-hostfile", false, &names, &error));
    EXPECT_NE(error.find("cannot read the hostfile"), std::string::npos) << error;
    EXPECT_NE(error.find("no-such-hostfile"), std::string::npos) << error;
}

TEST(HostList, ARankFindsItsHostByNameThenAddressThenLoopback) {
    const std::map<std::string, Names> dns = {
        {"node1", {"10.0.0.1"}}, {"node2", {"10.0.0.2", "fd00::2"}},
        {"localhost", {"127.0.0.1", "::1"}}, {"10.0.0.3", {"10.0.0.3"}}};
    auto resolve = [&](const std::string &name) {
        auto it = dns.find(name);
        return it == dns.end() ? Names{} : it->second;
    };
    const Names hosts{"localhost", "node1", "NODE2.cluster", "10.0.0.3"};
    // By name, case aside, full or first label.
    EXPECT_EQ(match_local_host(hosts, "node2", {"127.0.0.1"}, resolve), 2);
    EXPECT_EQ(match_local_host(hosts, "node1.cluster", {"127.0.0.1"}, resolve), 1);
    // By address, whatever the machine calls itself; a loopback entry
    // ("localhost") matches every machine, so only when nothing else does.
    EXPECT_EQ(match_local_host(hosts, "box", {"127.0.0.1", "::1", "10.0.0.3"}, resolve), 3);
    EXPECT_EQ(match_local_host(hosts, "box", {"127.0.0.1", "10.0.0.1"}, resolve), 1);
    EXPECT_EQ(match_local_host(hosts, "box", {"127.0.0.1"}, resolve), 0);
    EXPECT_EQ(match_local_host({"node1", "node2"}, "box", {"127.0.0.1", "10.9.9.9"}, resolve),
              -1);
}

}  // namespace
