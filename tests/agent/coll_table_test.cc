// Every collective of the one table against a real agent (coll_table.h),
// in every memory mode and team sizes 1, 2, 3 and 5: run by the agent, and
// by the members themselves (every member waiting from a thread of its own,
// so that they may claim the operation: the same plan through the same
// runner must give the same bytes). Then the corners the matrix leaves: a
// team of 8 with every root, and 1 Mi + 1 elements (a last chunk of one
// element after many full ones), both ways.
#include <gtest/gtest.h>

#include <string>

#include "coll_table.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::Memory;
using deputy::testing::Team;

void run_table(const AgentProcess &agent, const std::string &prefix, bool together) {
    int next_key = 0;
    for (Memory memory : deputy::testing::kAllMemory) {
        for (int p : {1, 2, 3, 5}) {
            Team team(agent, p, prefix + std::to_string(next_key++), memory);
            if (together) team.wait_together();
            deputy::testing::check_table(
                team, [&](int r) { return team[r].team; },
                std::string(deputy::testing::name(memory)) + (together ? " together" : ""));
        }
    }
}

TEST(CollTable, EveryCollectiveRunByTheAgentMatchesTheReference) {
    AgentProcess agent({"--engines", "2"});
    run_table(agent, "table-agent", false);
}

TEST(CollTable, EveryCollectiveRunByTheMembersMatchesTheReference) {
    AgentProcess agent({"--engines", "2"});
    run_table(agent, "table-members", true);
    EXPECT_GT(deputy::testing::run_by_members(agent), 0u) << "the members never ran an operation themselves";
}

TEST(CollTable, ATeamOfEightWithEveryRootBothWays) {
    AgentProcess agent({"--engines", "2"});
    deputy::testing::TableShape shape;
    shape.counts = {1, 13};
    shape.every_root = true;
    for (Memory memory : {Memory::mapped, Memory::heap})
        for (bool together : {false, true}) {
            Team team(agent, 8, std::string("eight-") + deputy::testing::name(memory) +
                                    (together ? "-together" : ""),
                      memory);
            if (together) team.wait_together();
            deputy::testing::check_table(
                team, [&](int r) { return team[r].team; },
                std::string(deputy::testing::name(memory)) + (together ? " together" : ""),
                shape);
        }
}

TEST(CollTable, OneMebiElementPlusOneBothWays) {
    AgentProcess agent({"--engines", "2"});
    deputy::testing::TableShape shape;
    shape.counts = {(size_t(1) << 20) + 1};
    for (int p : {3})
        for (bool together : {false, true}) {
            Team team(agent, p, "mebi-" + std::to_string(p) + (together ? "-together" : ""));
            if (together) team.wait_together();
            deputy::testing::check_table(
                team, [&](int r) { return team[r].team; },
                std::string("mapped") + (together ? " together" : ""), shape);
        }
}

}  // namespace
