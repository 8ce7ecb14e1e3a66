// `deputy mpirun` (tools/cli/launch): where the program starts among mpirun's
// arguments and which of them name hosts, for Open MPI and Hydra; the
// rank environment options; binding options and the rank count; the block
// mapping of ranks to simulated nodes; commands as shell text.
#include "cli/launch/mpirun_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/launch/mpirun_helpers.h"
#include "cli/launch/spawn.h"

namespace {

using deputy::launch::MpiFlavor;
using deputy::launch::MpirunCommandLine;
using Args = std::vector<std::string>;

MpirunCommandLine parse_ok(const Args &args, MpiFlavor flavor = MpiFlavor::kOpenMpi) {
    MpirunCommandLine out;
    std::string error;
    EXPECT_TRUE(deputy::launch::parse_mpirun_args(args, flavor, &out, &error)) << error;
    return out;
}

std::string parse_error(const Args &args, MpiFlavor flavor = MpiFlavor::kOpenMpi) {
    MpirunCommandLine out;
    std::string error;
    EXPECT_FALSE(deputy::launch::parse_mpirun_args(args, flavor, &out, &error));
    return error;
}

TEST(MpirunArgs, OpenMpiOptionsWithValuesAreSkipped) {
    auto c = parse_ok({"-np", "4", "--map-by", "ppr:2:node", "-x", "A=1", "--mca", "btl",
                       "self,tcp", "./prog", "-np", "9"});
    EXPECT_EQ(c.programs, std::vector<size_t>{9});
    EXPECT_TRUE(c.hosts.empty());
    c = parse_ok({"--oversubscribe", "--report-bindings", "-np", "2", "prog"});
    EXPECT_EQ(c.programs, std::vector<size_t>{4});
    c = parse_ok({"--np=2", "--map-by=core", "prog", "--hostfile", "not-ours"});
    EXPECT_EQ(c.programs, std::vector<size_t>{2});
    EXPECT_TRUE(c.hosts.empty()) << "a program's own --hostfile is not mpirun's";
    c = parse_ok({"-gmca", "a", "b", "-N", "1", "prog"});
    EXPECT_EQ(c.programs, std::vector<size_t>{5});
}

TEST(MpirunArgs, OpenMpiHostOptions) {
    auto c = parse_ok({"-H", "a,b", "-np", "2", "prog"});
    EXPECT_EQ(c.hosts, (Args{"--host", "a,b"}));
    EXPECT_EQ(c.hosts_as_given, (Args{"-H", "a,b"}));
    c = parse_ok(
        {"--host", "a:2", "-hostfile", "h1", "--machinefile", "h2", "--hostfile=h3", "prog"});
    EXPECT_EQ(c.hosts,
              (Args{"--host", "a:2", "--hostfile", "h1", "--hostfile", "h2", "--hostfile", "h3"}));
    EXPECT_EQ(c.programs, std::vector<size_t>{7});
}

TEST(MpirunArgs, HydraOptions) {
    auto c = parse_ok({"-genv", "A", "1", "-f", "hosts", "-n", "2", "-l", "prog", "x"},
                      MpiFlavor::kHydra);
    EXPECT_EQ(c.programs, std::vector<size_t>{8});
    EXPECT_EQ(c.hosts, (Args{"--hostfile", "hosts"}));
    c = parse_ok({"-hosts", "a,b", "-ppn", "1", "prog"}, MpiFlavor::kHydra);
    EXPECT_EQ(c.hosts, (Args{"--host", "a,b"}));
    EXPECT_EQ(c.programs, std::vector<size_t>{4});
}

TEST(MpirunArgs, EveryAppContextHasItsProgram) {
    auto c = parse_ok({"-np", "1", "a", "x", ":", "-np", "2", "b", ":", "c"});
    EXPECT_EQ(c.programs, (std::vector<size_t>{2, 7, 9}));
}

TEST(MpirunArgs, ErrorsSayWhatIsMissing) {
    EXPECT_NE(parse_error({"-np"}).find("-np needs 1 value, and no program follows"),
              std::string::npos);
    EXPECT_NE(parse_error({"--mca", "a"}).find("--mca needs 2 values"), std::string::npos);
    EXPECT_NE(parse_error({"-np", "2"}).find("no program among the mpirun arguments"),
              std::string::npos);
    EXPECT_NE(parse_error({"-np", "1", "a", ":"}).find("no program after the last ':'"),
              std::string::npos);
    EXPECT_NE(parse_error({":", "a"}).find("no program before the ':' at argument 1"),
              std::string::npos);
    EXPECT_NE(parse_error({"-configfile", "f"}, MpiFlavor::kHydra).find("no program"),
              std::string::npos);
}

TEST(MpirunArgs, BindingOptionsAreFoundAsWritten) {
    auto c = parse_ok({"--bind-to", "socket", "-np", "2", "--cpu-set=0-3", "prog", "--bind-to",
                       "x"});
    EXPECT_EQ(c.binding_as_given, (Args{"--bind-to", "socket", "--cpu-set=0-3"}));
    c = parse_ok({"-rf", "ranks.txt", "--bind-to-core", "prog"});
    EXPECT_EQ(c.binding_as_given, (Args{"-rf", "ranks.txt", "--bind-to-core"}));
    c = parse_ok({"--map-by", "socket", "prog"});
    EXPECT_TRUE(c.binding_as_given.empty()) << "mapping is not binding";
    c = parse_ok({"-bind-to", "core", "-n", "2", "prog"}, MpiFlavor::kHydra);
    EXPECT_EQ(c.binding_as_given, (Args{"-bind-to", "core"}));
}

TEST(MpirunArgs, RanksAreTheSumOfEveryContextsCount) {
    EXPECT_EQ(parse_ok({"-np", "4", "prog"}).ranks, 4);
    EXPECT_EQ(parse_ok({"--np=2", "a", ":", "-n", "3", "b"}).ranks, 5);
    EXPECT_EQ(parse_ok({"-c", "6", "prog"}).ranks, 6);
    EXPECT_EQ(parse_ok({"-np", "2", "a", ":", "b"}).ranks, 0) << "b fills the slots: unknown";
    EXPECT_EQ(parse_ok({"prog", "-np", "9"}).ranks, 0) << "the program's -np is not mpirun's";
    EXPECT_EQ(parse_ok({"-n", "3", "prog"}, MpiFlavor::kHydra).ranks, 3);
}

TEST(MpirunArgs, RankEnvironmentPerFlavor) {
    EXPECT_EQ(deputy::launch::rank_env_option(MpiFlavor::kOpenMpi, "A", "b c"),
              (Args{"-x", "A=b c"}));
    EXPECT_EQ(deputy::launch::rank_env_option(MpiFlavor::kHydra, "A", "b c"),
              (Args{"-genv", "A", "b c"}));
}

TEST(RankShim, BlockMapping) {
    auto nodes = [](long size, int k) {
        std::vector<int> out;
        for (long r = 0; r < size; ++r) out.push_back(deputy::launch::node_of_rank(r, size, k));
        return out;
    };
    EXPECT_EQ(nodes(4, 2), (std::vector<int>{0, 0, 1, 1}));
    EXPECT_EQ(nodes(3, 2), (std::vector<int>{0, 0, 1}));
    EXPECT_EQ(nodes(5, 3), (std::vector<int>{0, 0, 1, 1, 2}));
    EXPECT_EQ(nodes(2, 4), (std::vector<int>{0, 2}));
    EXPECT_EQ(nodes(1, 1), (std::vector<int>{0}));
    // No overflow for large jobs: r * K in 64 bits.
    EXPECT_EQ(deputy::launch::node_of_rank(2'000'000'000L, 2'000'000'001L, 4096), 4095);
}

TEST(CommandLine, QuotesWhatAShellWouldSplit) {
    using deputy::launch::command_line;
    EXPECT_EQ(command_line({"/usr/bin/mpirun", "-x", "A=1,2:3", "a b", "x'y", ""}),
              "/usr/bin/mpirun -x A=1,2:3 'a b' 'x'\\''y' ''");
    EXPECT_EQ(command_line({"--socket", "<dir>/a{node}.sock", "<dir>/b.sock"}, {"<dir>"}),
              "--socket '<dir>/a{node}.sock' <dir>/b.sock");
}

}  // namespace
