// The --agent-cores layouts on hwloc synthetic topologies: several
// packages, SMT with both numberings of siblings (consecutive, as hwloc
// numbers them, and N / N+cores, as Linux does on x86), a machine like
// this 2-core VM; every error message exactly.
#include "common/placement.h"

#include <gtest/gtest.h>

#include "common/affinity.h"

namespace deputy {
namespace {

Topology synthetic(const std::string &description) {
    Topology t;
    std::string error;
    EXPECT_EQ(load_synthetic_topology(description, &t, &error), DP_OK) << error;
    return t;
}

// Parses and computes; the error text when either fails.
std::string place(const Topology &t, const std::string &text, Placement *p) {
    AgentCores request;
    std::string error;
    if (parse_agent_cores(text, "--agent-cores", &request, &error) != DP_OK) return error;
    if (compute_placement(t, request, "--agent-cores", p, &error) != DP_OK) return error;
    return "";
}

std::string list(const std::vector<int> &cpus) { return affinity::format_cpu_list(cpus); }

std::vector<std::string> slots(const Placement &p) {
    std::vector<std::string> out;
    for (const auto &slot : p.rank_slots) out.push_back(list(slot));
    return out;
}

// Linux's numbering on x86: core c has CPUs c and c + 8.
const char *kTwoSocketsSmt = "package:2 core:4 pu:2(indexes=2*8:1*2)";

TEST(Topology, SummarizesPackagesCoresAndSiblings) {
    Topology t = synthetic(kTwoSocketsSmt);
    EXPECT_EQ(t.summary(), "2 packages, 8 cores, 16 CPUs, SMT: 2 per core");
    ASSERT_EQ(t.cores.size(), 8u);
    EXPECT_EQ(t.cores[0].cpus, (std::vector<int>{0, 8}));
    EXPECT_EQ(t.cores[7].cpus, (std::vector<int>{7, 15}));
    EXPECT_EQ(t.cores[3].package, 0);
    EXPECT_EQ(t.cores[4].package, 1);
    EXPECT_EQ(t.cores[5].logical_index, 5);
    EXPECT_EQ(t.cpu_logical_index(8), 1);  // core 0's second PU
    EXPECT_EQ(t.cpu_logical_index(1), 2);
    EXPECT_EQ(t.core_of(12), &t.cores[4]);
    EXPECT_EQ(t.core_of(16), nullptr);
    EXPECT_TRUE(t.has_smt());
    EXPECT_EQ(list(t.all_cpus()), "0-15");

    Topology vm = synthetic("package:1 core:2 pu:1");
    EXPECT_EQ(vm.summary(), "1 package, 2 cores, 2 CPUs, no SMT");
    EXPECT_FALSE(vm.has_smt());
    // No Core objects: every CPU is a core of its own.
    Topology flat = synthetic("pu:4");
    EXPECT_EQ(flat.summary(), "1 package, 4 cores, 4 CPUs, no SMT");
}

TEST(Topology, RefusesADescriptionHwlocDoesNotKnow) {
    Topology t;
    std::string error;
    EXPECT_EQ(load_synthetic_topology("bogus:2", &t, &error), DP_ERR_INVALID);
    EXPECT_EQ(error,
              "'bogus:2' is not an hwloc synthetic topology (e.g. \"package:2 core:4 pu:2\")");
}

TEST(Topology, ThisMachineHasItsCpus) {
    Topology t;
    std::string error;
    ASSERT_EQ(load_machine_topology(&t, &error), DP_OK) << error;
    EXPECT_EQ(t.source, "this machine");
    EXPECT_EQ(t.cpu_count(), affinity::cpu_count());
}

TEST(Placement, SharedPinsNothing) {
    Placement p;
    EXPECT_EQ(place(synthetic(kTwoSocketsSmt), "shared", &p), "");
    EXPECT_FALSE(p.pinned());
    EXPECT_TRUE(p.engine_cpus.empty());
    EXPECT_TRUE(p.rank_slots.empty());
    EXPECT_EQ(p.agent_cores, 0);
}

TEST(Placement, LastReservesTheLastCoreOfEachPackage) {
    Placement p;
    ASSERT_EQ(place(synthetic(kTwoSocketsSmt), "last", &p), "");
    EXPECT_EQ(list(p.agent_cpus), "3,7,11,15");
    // First CPUs of both cores before their siblings: two engines, two cores.
    EXPECT_EQ(p.engine_cpus, (std::vector<int>{3, 7, 11, 15}));
    EXPECT_EQ(p.agent_cores, 2);
    EXPECT_EQ(slots(p), (std::vector<std::string>{"0,8", "1,9", "2,10", "4,12", "5,13", "6,14"}));
    EXPECT_EQ(list(p.rank_cpus()), "0-2,4-6,8-10,12-14");
    EXPECT_EQ(list(p.slot_of(7)), "1,9");  // rank 7 wraps to the second slot

    // hwloc's own numbering: siblings consecutive.
    ASSERT_EQ(place(synthetic("package:2 core:4 pu:2"), "last", &p), "");
    EXPECT_EQ(list(p.agent_cpus), "6-7,14-15");
    EXPECT_EQ(p.engine_cpus, (std::vector<int>{6, 14, 7, 15}));
    EXPECT_EQ(list(p.rank_cpus()), "0-5,8-13");
}

TEST(Placement, LastOnAMachineLikeThisVm) {
    Placement p;
    ASSERT_EQ(place(synthetic("package:1 core:2 pu:1"), "last", &p), "");
    EXPECT_EQ(list(p.agent_cpus), "1");
    EXPECT_EQ(p.engine_cpus, (std::vector<int>{1}));
    EXPECT_EQ(slots(p), (std::vector<std::string>{"0"}));
}

TEST(Placement, ACountTakesCoresFromTheEndOfEachPackageInTurn) {
    Placement p;
    ASSERT_EQ(place(synthetic(kTwoSocketsSmt), "3", &p), "");
    EXPECT_EQ(p.engine_cpus, (std::vector<int>{3, 7, 2, 11, 15, 10}));
    EXPECT_EQ(list(p.agent_cpus), "2-3,7,10-11,15");
    EXPECT_EQ(p.agent_cores, 3);
    EXPECT_EQ(list(p.rank_cpus()), "0-1,4-6,8-9,12-14");

    ASSERT_EQ(place(synthetic(kTwoSocketsSmt), "1", &p), "");
    EXPECT_EQ(list(p.agent_cpus), "3,11");
    ASSERT_EQ(place(synthetic(kTwoSocketsSmt), "7", &p), "");
    EXPECT_EQ(slots(p), (std::vector<std::string>{"4,12"}));  // package 0 gave its 4 cores
}

TEST(Placement, ACpuListGoesToTheAgentAndEverythingElseToTheRanks) {
    Placement p;
    ASSERT_EQ(place(synthetic(kTwoSocketsSmt), "cpus:11,3,3", &p), "");
    EXPECT_EQ(p.engine_cpus, (std::vector<int>{11, 3}));  // as given, each once
    EXPECT_EQ(list(p.agent_cpus), "3,11");
    EXPECT_EQ(p.agent_cores, 1);
    EXPECT_EQ(slots(p), (std::vector<std::string>{"0,8", "1,9", "2,10", "4,12", "5,13", "6,14",
                                                  "7,15"}));
    // Half a core: the ranks keep its other CPU.
    ASSERT_EQ(place(synthetic(kTwoSocketsSmt), "cpus:3", &p), "");
    EXPECT_EQ(slots(p)[3], "11");
    EXPECT_EQ(list(p.rank_cpus()), "0-2,4-15");
}

TEST(Placement, SmtPutsTheEnginesOnTheSiblingsOfTheRanksCores) {
    Placement p;
    ASSERT_EQ(place(synthetic(kTwoSocketsSmt), "smt", &p), "");
    EXPECT_EQ(list(p.agent_cpus), "8-15");
    EXPECT_EQ(p.engine_cpus, (std::vector<int>{15, 14, 13, 12, 11, 10, 9, 8}));
    EXPECT_EQ(p.agent_cores, 0);
    EXPECT_EQ(slots(p), (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"}));

    ASSERT_EQ(place(synthetic("package:1 core:1 pu:2"), "smt", &p), "");
    EXPECT_EQ(list(p.agent_cpus), "1");
    EXPECT_EQ(slots(p), (std::vector<std::string>{"0"}));
}

TEST(Placement, ErrorsNameTheFlagAndTheLimit) {
    Placement p;
    const Topology vm = synthetic("package:1 core:2 pu:1");
    const Topology big = synthetic(kTwoSocketsSmt);
    EXPECT_EQ(place(vm, "", &p),
              "--agent-cores: empty; expected shared, last, smt, a number of cores or cpus:LIST");
    EXPECT_EQ(place(vm, "first", &p),
              "--agent-cores first: expected shared, last, smt, a number of cores or cpus:LIST");
    EXPECT_EQ(place(vm, "0", &p),
              "--agent-cores 0: reserve at least 1 core (shared reserves none)");
    EXPECT_EQ(place(vm, "-1", &p),
              "--agent-cores -1: reserve at least 1 core (shared reserves none)");
    EXPECT_EQ(place(vm, "6,7", &p),
              "--agent-cores 6,7: a CPU list is written cpus:6,7 (a bare number is a count of "
              "cores)");
    EXPECT_EQ(place(vm, "cpus:1-x", &p),
              "--agent-cores cpus:1-x: bad CPU list element '1-x' (expected N or N-M)");
    EXPECT_EQ(place(vm, "cpus:", &p),
              "--agent-cores cpus: needs a CPU list after the colon (cpus:6-7,14-15)");
    EXPECT_EQ(place(vm, "2", &p),
              "--agent-cores 2: reserving 2 cores leaves none for the ranks: this machine has 2 "
              "(1 package, 2 cores, 2 CPUs, no SMT); at most 1");
    EXPECT_EQ(place(big, "8", &p),
              "--agent-cores 8: reserving 8 cores leaves none for the ranks: this machine has 8 "
              "(2 packages, 8 cores, 16 CPUs, SMT: 2 per core); at most 7");
    EXPECT_EQ(place(vm, "cpus:2", &p),
              "--agent-cores cpus:2: CPU 2 does not exist here (this machine's CPUs: 0-1)");
    EXPECT_EQ(place(vm, "cpus:1,0", &p),
              "--agent-cores cpus:1,0: that is every CPU of this machine (0-1); leave at least "
              "one for the ranks");
    EXPECT_EQ(place(vm, "smt", &p),
              "--agent-cores smt: this machine has no SMT (1 package, 2 cores, 2 CPUs, no SMT); "
              "--agent-cores last reserves a whole core instead");
    EXPECT_EQ(place(synthetic("package:2 core:1 pu:1"), "last", &p),
              "--agent-cores last: reserving the last core of each package leaves no core for "
              "the ranks (2 packages, 2 cores, 2 CPUs, no SMT)");
    EXPECT_EQ(place(synthetic("package:1 core:1 pu:2"), "last", &p),
              "--agent-cores last: reserving the last core of each package leaves no core for "
              "the ranks (1 package, 1 core, 2 CPUs, SMT: 2 per core); --agent-cores smt puts "
              "the engines on SMT siblings instead");
}

TEST(Placement, AdviceForASharedPlacement) {
    const Topology vm = synthetic("package:1 core:2 pu:1");
    const std::string last = "--agent-cores last gives the engines CPU 1 and the ranks CPU 0";
    EXPECT_EQ(shared_advice(vm, 1), last);
    EXPECT_EQ(shared_advice(vm, 0), last);  // ranks unknown
    EXPECT_EQ(shared_advice(vm, 2),
              "this machine has no core to spare for them (2 ranks; 1 package, 2 cores, 2 CPUs, "
              "no SMT); with at most 1 rank, --agent-cores last gives the engines a core of their "
              "own");
    const Topology big = synthetic(kTwoSocketsSmt);
    EXPECT_EQ(shared_advice(big, 6),
              "--agent-cores last gives the engines CPUs 3,7,11,15 and the ranks CPUs "
              "0-2,4-6,8-10,12-14");
    EXPECT_EQ(shared_advice(big, 7),
              "--agent-cores 1 gives the engines CPUs 3,11 and the ranks CPUs 0-2,4-10,12-15");
    EXPECT_EQ(shared_advice(big, 8),
              "--agent-cores smt puts the engines on the SMT siblings of the ranks' cores (CPUs "
              "8-15; the ranks on CPUs 0-7)");
    EXPECT_EQ(shared_advice(big, 9),
              "this machine has no core to spare for them (9 ranks; 2 packages, 8 cores, 16 CPUs, "
              "SMT: 2 per core); with at most 7 ranks, --agent-cores 1 gives the engines a core of "
              "their own");
    EXPECT_EQ(shared_advice(synthetic("package:1 core:1 pu:1"), 1),
              "this machine has one core (1 package, 1 core, 1 CPU, no SMT): nothing to spare for "
              "the engines");
}

TEST(Placement, CpuPhrasesAndIntersections) {
    EXPECT_EQ(cpus_phrase({}), "no CPU");
    EXPECT_EQ(cpus_phrase({1}), "CPU 1");
    EXPECT_EQ(cpus_phrase({3, 0, 1, 2, 8}), "CPUs 0-3,8");
    EXPECT_EQ(cpus_in_both({0, 1, 2, 5}, {5, 2, 9}), (std::vector<int>{2, 5}));
    EXPECT_TRUE(cpus_in_both({0}, {1}).empty());
}

}  // namespace
}  // namespace deputy
