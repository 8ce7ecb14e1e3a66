// Teams larger than the 64 members deputy once stopped at. On one agent:
// every collective of the table bit-exact with 128 members run by the agent
// (members that leave everything to the agent: no board, no views), on one
// and on two engines; 128 members in 4 processes that each get the board
// and all 257 views (more fds than one message carries: TEAM_READY and
// TEAM_VIEWS); 72 members that run the operations themselves. Over 8
// agents: 1024 members, every collective at count 1; teams of 4096 and
// 16384 ranks formed with stand-ins. Row and
// column teams of a 16 x 8 grid at once. And the limit itself, refused by
// the library and by the agent.
//
// One process holds many members (contexts), as the collective tests do:
// it receives and maps every member's views once per member, so a test
// that wants views keeps its members per process few enough for the fd
// limit and vm.max_map_count (65530; 3 mappings per view, guards
// included). Small counts keep the n x n blocks of an alltoall small.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "channel/socket_io.h"
#include "coll_table.h"
#include "node_agents.h"
#include "raw_client.h"

namespace {

using deputy::testing::AgentConfig;
using deputy::testing::AgentProcess;
using deputy::testing::Memory;
using deputy::testing::Team;

constexpr int kMembers = 128;
// A board and two views per member (pool and heap), more than one message
// carries: TEAM_READY brings the first ones, TEAM_VIEWS the rest.
static_assert(1 + 2 * kMembers > deputy::channel::sock::kMaxFdsPerMessage);
constexpr int kProcesses = 4;
// Members that run the operations themselves: each builds its share of the
// local plan and runs it (docs/collectives.md, "Teams of many members");
// 72 members' views (145 fds each, no more than one message) all at once
// stay within this process's fd limit.
constexpr int kRunningMembers = 72;

// Mappings of this process's memfds whose name starts with `prefix`
// ("/memfd:NAME (deleted)").
int mappings_of(const std::string &prefix) {
    std::ifstream maps("/proc/self/maps");
    int n = 0;
    for (std::string line; std::getline(maps, line);) {
        const size_t at = line.find("/memfd:" + prefix);
        n += at != std::string::npos && line.find('/', at + 1) == std::string::npos;
    }
    return n;
}

// An agent config file in a private directory, removed with it.
// Raises this process's soft limit on fds to the hard one; returns it.
rlim_t raise_fd_limit() {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
    return r.rlim_cur;
}

class LargeTeam : public ::testing::TestWithParam<int> {};

TEST_P(LargeTeam, EveryCollectiveRunByTheAgentMatchesTheReference) {
    const AgentConfig config(R"("engines": )" + std::to_string(GetParam()) +
                             R"(, "max_process_clients": 256)");
    AgentProcess agent({"--config", config.path()});
    // Every member leaves its operations to the agent (claimers 0): the
    // team gets no board, and no member a view (128 x 257 fds and mappings
    // in this one process otherwise).
    Team team(agent, kMembers, "large-agent", Memory::mapped, 4 << 20, 0);
    ASSERT_EQ(dp_team_size(team[kMembers - 1].team), kMembers);
    EXPECT_EQ(mappings_of("deputy-team-"), 0) << "a member that runs nothing got a board";
    deputy::testing::TableShape shape;
    shape.counts = {1, 13};
    deputy::testing::check_table(team, [&](int r) { return team[r].team; }, "128 by the agent",
                                 shape);
}

INSTANTIATE_TEST_SUITE_P(Engines, LargeTeam, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int> &i) {
                             return std::to_string(i.param) + "Engines";
                         });

// With the agent stopped, whatever its engines, every operation is the
// members'.
TEST(LargeTeamMembers, EveryCollectiveRunByTheMembersMatchesTheReference) {
    if (const rlim_t fds = raise_fd_limit(); fds < rlim_t(kRunningMembers) * 160)
        GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is " << fds << ": " << kRunningMembers
                     << " members receiving 145 fds each at once need "
                     << kRunningMembers * 160 << " (raise `ulimit -Hn`)";
    setenv("DEPUTY_HEAP_BYTES", "67108864", 1);
    const AgentConfig config(R"("engines": 1, "max_process_clients": 256)");
    AgentProcess agent({"--config", config.path()});
    Team team(agent, kRunningMembers, "large-members", Memory::mapped, 4 << 20);
    team.wait_together();
    deputy::testing::TableShape shape;
    shape.counts = {1};
    {
        const deputy::testing::AgentPaused paused(agent, true, std::chrono::seconds(240));
        deputy::testing::check_table(team, [&](int r) { return team[r].team; },
                                     "72 by the members", shape);
    }
    EXPECT_GT(deputy::testing::run_by_members(agent), 0u);
}

// One process's members of the 128-member team, ranks first..first+count-1:
// each gets the board and all 257 views (heaps included), then they sum
// their ranks. 0 when all is well; otherwise says why on stderr.
int views_process(const AgentProcess &agent, int first, int count) {
    dp_config_t config = agent.config();
    config.pool_bytes = 2 << 20;
    const size_t n = size_t(count);
    std::vector<dp_context_t *> ctx(n, nullptr);
    std::vector<dp_team_t *> team(n, nullptr);
    std::vector<dp_status_t> st(n, DP_ERR_INTERNAL);
    for (auto &c : ctx)
        if (dp_init(&config, &c) != DP_OK) return fprintf(stderr, "dp_init failed\n"), 1;
    std::vector<std::thread> joiners;
    for (int i = 0; i < count; ++i)
        joiners.emplace_back([&, i] {
            st[size_t(i)] = dp_team_create_timeout(ctx[size_t(i)], "views", first + i, kMembers,
                                                   60000, &team[size_t(i)]);
        });
    for (auto &t : joiners) t.join();
    for (int i = 0; i < count; ++i)
        if (st[size_t(i)] != DP_OK)
            return fprintf(stderr, "rank %d: join: %s\n", first + i, dp_status_name(st[size_t(i)])),
                   1;
    // Each member mapped the board once and a heap view of every member;
    // the process maps its own heap too.
    const int boards = mappings_of("deputy-team-"), heaps = mappings_of("deputy-heap");
    if (boards != count || heaps != 1 + count * kMembers)
        return fprintf(stderr, "ranks %d..%d: %d board and %d heap mappings, want %d and %d\n",
                       first, first + count - 1, boards, heaps, count, 1 + count * kMembers),
               1;
    std::vector<int64_t *> in(n), out(n);
    std::vector<dp_request_t *> req(n);
    for (int i = 0; i < count; ++i) {
        in[size_t(i)] = static_cast<int64_t *>(dp_malloc(ctx[size_t(i)], 64));
        out[size_t(i)] = static_cast<int64_t *>(dp_malloc(ctx[size_t(i)], 64));
        *in[size_t(i)] = first + i;
        if (dp_iallreduce(in[size_t(i)], out[size_t(i)], 1, DP_INT64, DP_SUM, team[size_t(i)],
                          &req[size_t(i)]) != DP_OK)
            return fprintf(stderr, "rank %d: post failed\n", first + i), 1;
    }
    std::vector<std::thread> waiters;
    for (int i = 0; i < count; ++i)
        waiters.emplace_back([&, i] { st[size_t(i)] = dp_wait(req[size_t(i)]); });
    for (auto &t : waiters) t.join();
    for (int i = 0; i < count; ++i) {
        if (st[size_t(i)] != DP_OK || *out[size_t(i)] != kMembers * (kMembers - 1) / 2)
            return fprintf(stderr, "rank %d: %s, sum %lld\n", first + i,
                           dp_status_name(st[size_t(i)]), (long long)*out[size_t(i)]),
                   1;
        dp_request_free(req[size_t(i)]);
        dp_team_destroy(team[size_t(i)]);
        dp_finalize(ctx[size_t(i)]);
    }
    return 0;
}

// 128 members in 4 processes, as ranks of a large job on a node would be
// (32 each, so that one process receives and maps the views of 32 members
// at once, within its fd limit and vm.max_map_count).
TEST(LargeTeamViews, MembersOfFourProcessesGetTheBoardAndEveryView) {
    const int per = kMembers / kProcesses;
    if (const rlim_t fds = raise_fd_limit(); fds < rlim_t(per) * 300)
        GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is " << fds << ": 32 members receiving 257 "
                     << "fds each at once need " << per * 300 << " (raise `ulimit -Hn`)";
    setenv("DEPUTY_HEAP_BYTES", "67108864", 1);
    AgentProcess agent;
    std::vector<pid_t> children;
    for (int p = 0; p < kProcesses; ++p) {
        const pid_t pid = fork();
        if (pid == 0) _exit(views_process(agent, p * per, per));
        ASSERT_GT(pid, 0);
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        const bool ended = deputy::testing::eventually(
            [&] { return waitpid(pid, &status, WNOHANG) == pid; }, 120000);
        if (!ended) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        EXPECT_TRUE(ended) << "process " << pid << " did not finish within 120 s";
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "process " << pid << " failed (its stderr says why)";
    }
}

// More members on one agent than a board holds (channel::kMaxBoardMembers,
// 256): the team forms without one, each member free to run operations
// but none given a view, and the agent runs the whole table bit-exact.
TEST(LargeTeamOneAgent, MoreMembersThanABoardHoldsAreRunByTheAgent) {
    constexpr int kN = 300;
    const AgentConfig config(R"("engines": 2, "max_clients": 320, "max_process_clients": 320, )"
                             R"("max_process_pending_joins": 320)");
    AgentProcess agent({"--config", config.path()});
    Team team(agent, kN, "beyond-board", Memory::mapped, 1 << 20);
    ASSERT_EQ(dp_team_size(team[kN - 1].team), kN);
    EXPECT_EQ(mappings_of("deputy-team-"), 0) << "a team of " << kN << " members got a board";
    const auto info = deputy::testing::agent_info(agent);
    ASSERT_EQ(info["teams"].size(), 1u) << info.dump();
    EXPECT_EQ(info["teams"][0]["members_here"], kN);
    EXPECT_FALSE(info["teams"][0]["board"].get<bool>());
    deputy::testing::TableShape shape;
    shape.counts = {1};
    deputy::testing::check_table(team, [&](int r) { return team[r].team; }, "300 on one agent",
                                 shape);
    EXPECT_EQ(deputy::testing::run_by_members(agent), 0u);
}

// One member more than DP_TEAM_MAX_SIZE: the library refuses it before
// asking, and the agent refuses a raw join of that size naming the limit;
// an agent without other nodes refuses a size above its max_clients.
TEST(LargeTeamLimit, ASizeAboveTheLimitIsRefusedNamingIt) {
    AgentProcess agent;
    dp_config_t c = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&c, &ctx), DP_OK);
    dp_team_t *team = nullptr;
    EXPECT_EQ(dp_team_create(ctx, "too-large", 0, DP_TEAM_MAX_SIZE + 1, &team), DP_ERR_INVALID);
    EXPECT_EQ(team, nullptr);
    dp_finalize(ctx);
    deputy::testing::RawClient raw;
    ASSERT_TRUE(raw.attach(agent.socket().c_str()));
    namespace control = deputy::channel::control;
    std::vector<uint8_t> payload;
    control::encode(control::TeamJoin{1, "too-large", deputy::testing::kTestJobSecret, 0,
                                      DP_TEAM_MAX_SIZE + 1, 1000},
                    &payload);
    control::TeamReady ready;
    ASSERT_TRUE(raw.team_join(payload, &ready));
    EXPECT_EQ(ready.status, DP_ERR_INVALID);
    EXPECT_NE(ready.reason.find("size 16385 (1..16384)"), std::string::npos) << ready.reason;
    // On one node every member is one of this agent's clients: a size
    // above its max_clients could never form, and is refused at once.
    payload.clear();
    control::encode(control::TeamJoin{2, "above-clients", deputy::testing::kTestJobSecret, 0,
                                      257, 1000},
                    &payload);
    ASSERT_TRUE(raw.team_join(payload, &ready));
    EXPECT_EQ(ready.status, DP_ERR_TOO_LARGE);
    EXPECT_NE(ready.reason.find("size 257, more members than this agent serves (max_clients = "
                                "256"),
              std::string::npos)
        << ready.reason;
}

// 1024 members over 8 agents, 128 on each, ranks interleaved (every
// node's ranks a stride, the member map at its longest): every collective
// of the table at count 1.
TEST(LargeTeamNodes, EveryCollectiveWithAThousandRanksOverEightAgents) {
    if (const std::string why = deputy::testing::why_no_nodes(); !why.empty()) GTEST_SKIP() << why;
    constexpr int kNodes = 8, kN = 1024;
    deputy::testing::NodeAgents agents(kNodes, {}, R"("max_process_clients": 256)");
    ASSERT_TRUE(agents.ready()) << kNodes << " agents under mpirun did not come up";
    std::vector<int> node_of(kN);
    for (int r = 0; r < kN; ++r) node_of[size_t(r)] = r % kNodes;
    deputy::testing::SpanningTeam team(agents, node_of, "thousand", Memory::mapped, 120000,
                                       1 << 20);
    for (int r = 0; r < team.size(); ++r) ASSERT_EQ(team.create_status(r), DP_OK) << "rank " << r;
    deputy::testing::TableShape shape;
    shape.counts = {1};
    deputy::testing::check_table(team, [&](int r) { return team.team(r); }, "1024 over 8 agents",
                                 shape);
}

// Teams of 4096 and 16384 ranks over 8 agents, one client per agent (the
// first rank of each node's block) and the rest stand-ins the agents join
// themselves (test_stand_in_key): creation within a bound (docs/agent.md
// states it; PERFORMANCE.md has the figures), every member's operation
// then fails (stand-ins have no memory) and the team is destroyed.
TEST(LargeTeamNodes, TeamsOfThousandsFormWithStandIns) {
    if (const std::string why = deputy::testing::why_no_nodes(); !why.empty()) GTEST_SKIP() << why;
    constexpr int kNodes = 8;
    for (const int n : {4096, 16384}) {
        SCOPED_TRACE(std::to_string(n) + " ranks");
        const std::string key = "stand" + std::to_string(n);
        deputy::testing::NodeAgents agents(
            kNodes, {},
            R"("test_stand_in_key": ")" + key + R"(", "test_stand_in_block": )" +
                std::to_string(n / kNodes));
        ASSERT_TRUE(agents.ready()) << kNodes << " agents under mpirun did not come up";
        std::vector<std::string> sockets(kNodes);
        std::vector<dp_context_t *> ctx(kNodes, nullptr);
        for (int k = 0; k < kNodes; ++k) {
            sockets[size_t(k)] = agents.socket(k);
            dp_config_t c = DP_CONFIG_INITIALIZER;
            c.job_secret = deputy::testing::kTestJobSecret;
            c.agent = sockets[size_t(k)].c_str();
            c.pool_bytes = 1 << 20;
            ASSERT_EQ(dp_init(&c, &ctx[size_t(k)]), DP_OK);
        }
        std::vector<dp_team_t *> team(kNodes, nullptr);
        std::vector<dp_status_t> status(kNodes, DP_ERR_INTERNAL);
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::thread> joiners;
        for (int k = 0; k < kNodes; ++k)
            joiners.emplace_back([&, k] {
                status[size_t(k)] = dp_team_create_timeout(ctx[size_t(k)], key.c_str(),
                                                           k * (n / kNodes), n, 60000,
                                                           &team[size_t(k)]);
            });
        for (auto &t : joiners) t.join();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (int k = 0; k < kNodes; ++k) ASSERT_EQ(status[size_t(k)], DP_OK) << "node " << k;
        std::printf("[ stand-ins ] %d ranks over %d agents formed in %.3f s\n", n, kNodes,
                    seconds);
        EXPECT_LT(seconds, 2.0) << "creation of " << n << " ranks with stand-ins";
        {
            std::string text, error;
            ASSERT_EQ(deputy::channel::request_agent_info(agents.socket(3), "", 2'000'000'000,
                                                          &text, &error),
                      DP_OK)
                << error;
            const auto info = nlohmann::json::parse(text);
            ASSERT_EQ(info["teams"].size(), 1u) << info.dump();
            EXPECT_EQ(info["teams"][0]["size"], n);
            EXPECT_EQ(info["teams"][0]["local_ranks"], n / kNodes);
            EXPECT_EQ(info["teams"][0]["stand_ins"], n / kNodes - 1);
            EXPECT_TRUE(info["teams"][0]["broken"].get<bool>());
        }
        // Each member's first operation fails: every node broke the team.
        for (int k = 0; k < kNodes; ++k) {
            auto *b = static_cast<int64_t *>(dp_malloc(ctx[size_t(k)], 64));
            EXPECT_EQ(dp_allreduce(b, b + 1, 1, DP_INT64, DP_SUM, team[size_t(k)]),
                      DP_ERR_AGENT_LOST)
                << "node " << k;
            dp_free(ctx[size_t(k)], b);
        }
        for (int k = 0; k < kNodes; ++k) {
            EXPECT_EQ(dp_team_destroy(team[size_t(k)]), DP_OK);
            dp_finalize(ctx[size_t(k)]);
        }
    }
}

// A 16 x 8 grid of 128 members, as FFT and LU codes split a communicator:
// every member in a row team and a column team, an allreduce posted on
// both before either is waited for, 3 rounds. Row sums and column sums
// exact: the two teams' operations run side by side on shared members.
TEST(LargeTeamGrid, RowAndColumnTeamsRunSideBySide) {
    constexpr int kRows = 16, kCols = 8, kN = kRows * kCols;
    const AgentConfig config(R"("engines": 2, "max_process_clients": 256)");
    AgentProcess agent({"--config", config.path()});
    dp_config_t c = agent.config();
    c.pool_bytes = 1 << 20;
    std::vector<dp_context_t *> ctx(kN, nullptr);
    setenv("DEPUTY_RANK_EXECUTION", "off", 1);  // (no views: 128 members in one process)
    for (auto &x : ctx) ASSERT_EQ(dp_init(&c, &x), DP_OK);
    unsetenv("DEPUTY_RANK_EXECUTION");
    std::vector<dp_team_t *> row(kN, nullptr), col(kN, nullptr);
    std::vector<dp_status_t> st(2 * kN, DP_ERR_INTERNAL);
    std::vector<std::thread> joiners;
    for (int r = 0; r < kN; ++r)
        joiners.emplace_back([&, r] {
            const int y = r / kCols, x = r % kCols;
            st[size_t(r)] = dp_team_create(ctx[size_t(r)], ("row" + std::to_string(y)).c_str(),
                                           x, kCols, &row[size_t(r)]);
            st[size_t(kN + r)] = dp_team_create(
                ctx[size_t(r)], ("col" + std::to_string(x)).c_str(), y, kRows, &col[size_t(r)]);
        });
    for (auto &t : joiners) t.join();
    for (dp_status_t s : st) ASSERT_EQ(s, DP_OK);
    std::vector<int64_t *> in(kN), row_sum(kN), col_sum(kN);
    for (int r = 0; r < kN; ++r) {
        in[size_t(r)] = static_cast<int64_t *>(dp_malloc(ctx[size_t(r)], 64));
        row_sum[size_t(r)] = static_cast<int64_t *>(dp_malloc(ctx[size_t(r)], 64));
        col_sum[size_t(r)] = static_cast<int64_t *>(dp_malloc(ctx[size_t(r)], 64));
    }
    for (int round = 0; round < 3; ++round) {
        std::vector<dp_request_t *> req(2 * kN, nullptr);
        for (int r = 0; r < kN; ++r) {
            *in[size_t(r)] = int64_t(r) * 1000 + round;
            ASSERT_EQ(dp_iallreduce(in[size_t(r)], row_sum[size_t(r)], 1, DP_INT64, DP_SUM,
                                    row[size_t(r)], &req[size_t(r)]),
                      DP_OK);
            ASSERT_EQ(dp_iallreduce(in[size_t(r)], col_sum[size_t(r)], 1, DP_INT64, DP_SUM,
                                    col[size_t(r)], &req[size_t(kN + r)]),
                      DP_OK);
        }
        for (dp_request_t *q : req) {
            ASSERT_EQ(dp_wait(q), DP_OK);
            dp_request_free(q);
        }
        for (int r = 0; r < kN; ++r) {
            const int y = r / kCols, x = r % kCols;
            int64_t want_row = 0, want_col = 0;
            for (int k = 0; k < kCols; ++k) want_row += int64_t(y * kCols + k) * 1000 + round;
            for (int k = 0; k < kRows; ++k) want_col += int64_t(k * kCols + x) * 1000 + round;
            ASSERT_EQ(*row_sum[size_t(r)], want_row) << "rank " << r << " round " << round;
            ASSERT_EQ(*col_sum[size_t(r)], want_col) << "rank " << r << " round " << round;
        }
    }
    for (int r = 0; r < kN; ++r) {
        dp_team_destroy(row[size_t(r)]);
        dp_team_destroy(col[size_t(r)]);
        dp_finalize(ctx[size_t(r)]);
    }
}

}  // namespace
