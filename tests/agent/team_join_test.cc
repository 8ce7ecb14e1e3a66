// Team joins from several threads of one context (client/control_channel.h):
// a thread waiting for its team to form must not hold up another thread's
// join, request or answer, in this process or through it in another one.
// Before the control channel was shared, dp_team_create held the context's
// socket until its team formed, and two processes whose threads joined two
// teams in opposite orders waited on each other for the whole timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "channel/agent_info.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::eventually;

int64_t ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
}

// Teams the agent has forming (members still missing), from `deputy info`;
// -1 when it does not answer.
int forming_teams(const AgentProcess &agent) {
    std::string text, error;
    if (deputy::channel::request_agent_info(agent.socket(), "", 2'000'000'000, &text, &error) !=
        DP_OK)
        return -1;
    const nlohmann::json info = nlohmann::json::parse(text);  // outlives the loop below
    int n = 0;
    for (const auto &t : info.at("teams")) n += !t.at("ready").get<bool>();
    return n;
}

// What rank `rank` contributes to team `team`'s allreduce: exact in doubles,
// and different for every team, so that a thread handed another thread's
// team computes a visibly wrong sum.
double input(int team, int rank, size_t i) {
    return double(team) * 1048576.0 + double(rank) * 4096.0 + double(i) * 0.25;
}

constexpr size_t kCount = 4096;

// Threads joined however the test ends: an ASSERT that returns early must
// not leave a joinable std::thread behind (std::terminate).
struct Threads : std::vector<std::thread> {
    ~Threads() { join_all(); }
    void join_all() {
        for (auto &t : *this)
            if (t.joinable()) t.join();
    }
};

// One member's create + allreduce: the create's status and time, and
// whether the sum came out bit for bit as rank 0's then rank 1's input.
struct Outcome {
    dp_status_t create = DP_ERR_INTERNAL;
    int64_t create_ms = -1;
    dp_status_t allreduce = DP_ERR_INTERNAL;
    int exact = 0;
};

Outcome join_and_reduce(dp_context_t *ctx, int team, int rank, unsigned timeout_ms) {
    Outcome o;
    const std::string key = "team-" + std::to_string(team);
    dp_team_t *t = nullptr;
    const auto start = std::chrono::steady_clock::now();
    o.create = dp_team_create_timeout(ctx, key.c_str(), rank, 2, timeout_ms, &t);
    o.create_ms = ms_since(start);
    if (o.create != DP_OK) return o;
    auto *src = static_cast<double *>(dp_malloc(ctx, kCount * sizeof(double)));
    auto *dst = static_cast<double *>(dp_malloc(ctx, kCount * sizeof(double)));
    if (src && dst) {
        for (size_t i = 0; i < kCount; ++i) src[i] = input(team, rank, i);
        o.allreduce = dp_allreduce(src, dst, kCount, DP_FLOAT64, DP_SUM, t);
        std::vector<double> want(kCount);
        for (size_t i = 0; i < kCount; ++i) want[i] = input(team, 0, i) + input(team, 1, i);
        o.exact = std::memcmp(dst, want.data(), kCount * sizeof(double)) == 0;
    }
    dp_free(ctx, src);
    dp_free(ctx, dst);
    dp_team_destroy(t);
    return o;
}

// Two threads of one context: the first joins team `first` at once, the
// second joins `second` 200 ms later (the first is then surely waiting).
void crossed(dp_context_t *ctx, int rank, int first, int second, Outcome out[2]) {
    std::thread a([&] { out[0] = join_and_reduce(ctx, first, rank, 15000); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::thread b([&] { out[1] = join_and_reduce(ctx, second, rank, 15000); });
    a.join();
    b.join();
}

// Process A's threads join X then Y, process B's Y then X, at the same
// time: each process's first join can only complete once the other
// process's second join is in. Both teams form at once, and compute.
TEST(TeamJoin, CrossedJoinsOfTwoProcessesFormPromptly) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    int ready[2], go[2], report[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(report), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // process B: rank 1 of both teams, Y (1) first
        dp_config_t config = agent.config();
        dp_context_t *ctx = nullptr;
        if (dp_init(&config, &ctx) != DP_OK) _exit(2);
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(3);
        Outcome out[2];
        crossed(ctx, 1, 1, 0, out);
        const bool sent = write(report[1], out, sizeof(out)) == ssize_t(sizeof(out));
        dp_finalize(ctx);
        _exit(sent ? 0 : 4);
    }
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    ASSERT_EQ(write(go[1], &c, 1), 1);
    Outcome mine[2];  // process A: rank 0 of both teams, X (0) first
    crossed(ctx, 0, 0, 1, mine);
    Outcome theirs[2];
    ASSERT_EQ(read(report[0], theirs, sizeof(theirs)), ssize_t(sizeof(theirs)));
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    for (const Outcome *o : {&mine[0], &mine[1], &theirs[0], &theirs[1]}) {
        EXPECT_EQ(o->create, DP_OK) << dp_status_name(o->create);
        // The joins wait for each other's process only: well under the
        // 15 s creation timeout the old serialised joins ran into.
        EXPECT_LT(o->create_ms, 5000);
        EXPECT_EQ(o->allreduce, DP_OK) << dp_status_name(o->allreduce);
        EXPECT_EQ(o->exact, 1);
    }
    EXPECT_EQ(dp_finalize(ctx), DP_OK);
    for (int fd : {ready[0], ready[1], go[0], go[1], report[0], report[1]}) close(fd);
}

// Eight joins pending on one context at once, answered in the reverse
// order; meanwhile another thread's REGISTER/DEREGISTER requests are
// answered in between. Every answer reaches the thread that asked.
TEST(TeamJoin, ManyPendingJoinsOnOneContextReachTheirThreads) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    dp_config_t config = agent.config();
    config.pool_bytes = 8 << 20;
    dp_context_t *a = nullptr, *b = nullptr;
    ASSERT_EQ(dp_init(&config, &a), DP_OK);
    ASSERT_EQ(dp_init(&config, &b), DP_OK);
    constexpr int kTeams = 8;
    Outcome outs[kTeams], partners[kTeams];
    Threads threads;
    for (int k = 0; k < kTeams; ++k)
        threads.emplace_back([&, k] { outs[k] = join_and_reduce(a, k, 0, 20000); });
    ASSERT_TRUE(eventually([&] { return forming_teams(agent) == kTeams; }, 10000))
        << forming_teams(agent) << " teams forming";
    // In-order requests of the same context while its joins wait.
    std::vector<char> heap(1 << 16);
    for (int i = 0; i < 50; ++i) {
        ASSERT_EQ(dp_mem_register(a, heap.data(), heap.size()), DP_OK);
        ASSERT_EQ(dp_mem_deregister(a, heap.data()), DP_OK);
    }
    const auto start = std::chrono::steady_clock::now();
    for (int k = kTeams - 1; k >= 0; --k) {
        threads.emplace_back([&, k] { partners[k] = join_and_reduce(b, k, 1, 20000); });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    threads.join_all();
    EXPECT_LT(ms_since(start), 5000);
    for (int k = 0; k < kTeams; ++k)
        for (const Outcome *o : {&outs[k], &partners[k]}) {
            EXPECT_EQ(o->create, DP_OK) << "team " << k << ": " << dp_status_name(o->create);
            EXPECT_EQ(o->allreduce, DP_OK) << "team " << k;
            EXPECT_EQ(o->exact, 1) << "team " << k << ": another team's sum";
        }
    EXPECT_EQ(forming_teams(agent), 0);
    EXPECT_EQ(dp_finalize(a), DP_OK);
    EXPECT_EQ(dp_finalize(b), DP_OK);
}

// A context is one rank of a team (its posts are the client's): now that
// its threads may join at once, a second rank of the same team from it is
// refused at once, and the first still forms with another context.
TEST(TeamJoin, OneContextIsOneRankOfATeam) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    dp_config_t config = agent.config();
    dp_context_t *a = nullptr, *b = nullptr;
    ASSERT_EQ(dp_init(&config, &a), DP_OK);
    ASSERT_EQ(dp_init(&config, &b), DP_OK);
    Outcome first, partner;
    Threads threads;
    threads.emplace_back([&] { first = join_and_reduce(a, 0, 0, 20000); });
    ASSERT_TRUE(eventually([&] { return forming_teams(agent) == 1; }, 10000));
    dp_team_t *t = nullptr;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(dp_team_create_timeout(a, "team-0", 1, 2, 20000, &t), DP_ERR_INVALID);
    EXPECT_LT(ms_since(start), 1000);
    EXPECT_EQ(t, nullptr);
    threads.emplace_back([&] { partner = join_and_reduce(b, 0, 1, 20000); });
    threads.join_all();
    for (const Outcome *o : {&first, &partner}) {
        EXPECT_EQ(o->create, DP_OK) << dp_status_name(o->create);
        EXPECT_EQ(o->allreduce, DP_OK) << dp_status_name(o->allreduce);
        EXPECT_EQ(o->exact, 1);
    }
    EXPECT_EQ(dp_finalize(a), DP_OK);
    EXPECT_EQ(dp_finalize(b), DP_OK);
}

// An agent allowing 4 pending joins per client: a 5th, 6th and 7th join of
// the same context are refused at once with DP_ERR_TOO_LARGE, while other
// clients' joins and `deputy info` are served; once the 4 formed, the
// context may join again.
TEST(TeamJoin, PendingJoinsOverTheLimitAreRefused) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string file = dir + "/agent.json";
    std::ofstream(file) << R"({"agent": {"max_pending_joins": 4}})";
    AgentProcess agent({"--config", file});
    ASSERT_TRUE(agent.running());
    dp_config_t config = agent.config();
    dp_context_t *a = nullptr, *b = nullptr, *other = nullptr;
    ASSERT_EQ(dp_init(&config, &a), DP_OK);
    ASSERT_EQ(dp_init(&config, &b), DP_OK);
    ASSERT_EQ(dp_init(&config, &other), DP_OK);
    constexpr int kLimit = 4;
    Outcome outs[kLimit], partners[kLimit];
    Threads threads;
    for (int k = 0; k < kLimit; ++k)
        threads.emplace_back([&, k] { outs[k] = join_and_reduce(a, k, 0, 20000); });
    ASSERT_TRUE(eventually([&] { return forming_teams(agent) == kLimit; }, 10000))
        << forming_teams(agent) << " teams forming";
    for (int k = kLimit; k < kLimit + 3; ++k) {
        dp_team_t *t = nullptr;
        const auto start = std::chrono::steady_clock::now();
        const std::string key = "team-" + std::to_string(k);
        EXPECT_EQ(dp_team_create_timeout(a, key.c_str(), 0, 2, 20000, &t), DP_ERR_TOO_LARGE);
        EXPECT_LT(ms_since(start), 1000);
        EXPECT_EQ(t, nullptr);
    }
    EXPECT_EQ(forming_teams(agent), kLimit);  // the refused joins left nothing behind
    // The limit is per client: another one joins as usual.
    dp_team_t *solo = nullptr;
    EXPECT_EQ(dp_team_create(other, "solo", 0, 1, &solo), DP_OK);
    EXPECT_EQ(dp_team_destroy(solo), DP_OK);
    for (int k = 0; k < kLimit; ++k)
        threads.emplace_back([&, k] { partners[k] = join_and_reduce(b, k, 1, 20000); });
    threads.join_all();
    for (int k = 0; k < kLimit; ++k)
        for (const Outcome *o : {&outs[k], &partners[k]}) {
            EXPECT_EQ(o->create, DP_OK) << "team " << k << ": " << dp_status_name(o->create);
            EXPECT_EQ(o->exact, 1) << "team " << k;
        }
    // Nothing pending any more: the context joins again.
    EXPECT_EQ(dp_team_create(a, "again", 0, 1, &solo), DP_OK);
    EXPECT_EQ(dp_team_destroy(solo), DP_OK);
    for (dp_context_t *ctx : {a, b, other}) EXPECT_EQ(dp_finalize(ctx), DP_OK);
    std::string cmd = "rm -rf '" + dir + "'";
    [[maybe_unused]] int rc = system(cmd.c_str());
}

// The agent killed while four threads wait in joins (and so, on one of
// them, read the socket): every one returns DP_ERR_AGENT_LOST within the
// lost timeout (1 s), and so do later calls.
TEST(TeamJoin, AgentKilledWhileThreadsWaitInJoins) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    constexpr int kWaiters = 4;
    std::atomic<int64_t> killed_at_ms{-1};
    const auto start = std::chrono::steady_clock::now();
    dp_status_t status[kWaiters];
    int64_t returned_ms[kWaiters];
    Threads threads;
    for (int k = 0; k < kWaiters; ++k)
        threads.emplace_back([&, k] {
            const std::string key = "doomed-" + std::to_string(k);
            dp_team_t *t = nullptr;
            status[k] = dp_team_create_timeout(ctx, key.c_str(), 0, 2, 20000, &t);
            returned_ms[k] = ms_since(start);
        });
    ASSERT_TRUE(eventually([&] { return forming_teams(agent) == kWaiters; }, 10000));
    killed_at_ms = ms_since(start);
    agent.stop(SIGKILL);
    threads.join_all();
    for (int k = 0; k < kWaiters; ++k) {
        EXPECT_EQ(status[k], DP_ERR_AGENT_LOST) << "thread " << k << ": "
                                                << dp_status_name(status[k]);
        EXPECT_LE(returned_ms[k] - killed_at_ms.load(), 1000) << "thread " << k;
    }
    dp_team_t *t = nullptr;
    EXPECT_EQ(dp_team_create(ctx, "later", 0, 1, &t), DP_ERR_AGENT_LOST);
    std::vector<char> heap(4096);
    EXPECT_EQ(dp_mem_register(ctx, heap.data(), heap.size()), DP_ERR_AGENT_LOST);
    EXPECT_EQ(dp_finalize(ctx), DP_OK);
}

}  // namespace
