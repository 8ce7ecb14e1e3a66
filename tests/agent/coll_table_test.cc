// Every collective of the one table against a real agent (coll_table.h),
// in every memory mode and team sizes 1-5: run by the agent, and by the
// members themselves (every member waiting from a thread of its own, so
// that they may claim the operation: the same plan through the same runner
// must give the same bytes).
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

}  // namespace
