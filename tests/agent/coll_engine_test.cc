// The collective engine as a shared service: a large operation in ordinary
// memory does not hold up another team, a full queue is its own status and
// the post can be made again, a member killed while the engines work on its
// memory fails only its team, and a node's worth of processes attach at
// once without the agent committing their pools up front.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "coll_test_util.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::eventually;
using deputy::testing::Memory;
using deputy::testing::Team;
using Clock = std::chrono::steady_clock;

long ms_since(Clock::time_point t) {
    return long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

// An agent started with {"agent": {<keys>}} as its --config.
class ConfiguredAgent {
  public:
    explicit ConfiguredAgent(const std::string &agent_keys)
        : dir_(deputy::testing::make_private_dir()), path_(dir_ + "/agent.json") {
        std::ofstream(path_) << "{\"agent\": {" << agent_keys << "}}";
        agent_ = std::make_unique<AgentProcess>(std::vector<std::string>{"--config", path_});
    }
    ~ConfiguredAgent() {
        agent_.reset();
        std::filesystem::remove_all(dir_);
    }
    AgentProcess &operator*() { return *agent_; }
    AgentProcess *operator->() { return agent_.get(); }

  private:
    std::string dir_, path_;
    std::unique_ptr<AgentProcess> agent_;
};

// Bytes of client segments the agent's memory holds: the pages of every
// deputy-client memfd it has open (a shmem file's blocks are its
// committed pages, whoever touched them).
uint64_t committed_client_bytes(const AgentProcess &agent) {
    uint64_t bytes = 0;
    const std::string fd_dir = "/proc/" + std::to_string(agent.pid()) + "/fd";
    for (const auto &entry : std::filesystem::directory_iterator(fd_dir)) {
        std::error_code ec;
        const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
        if (ec || target.find("memfd:deputy-client") == std::string::npos) continue;
        struct stat st;
        if (stat(entry.path().c_str(), &st) == 0) bytes += uint64_t(st.st_blocks) * 512;
    }
    return bytes;
}

// Team A runs a 64 MiB allreduce in registered (ordinary) memory; team B,
// on the same agent, runs 1000 8-byte allreduces meanwhile. B's operations
// must complete while A's is still running (the engines interleave B's
// tasks with A's chunks), and every result is bit-exact.
TEST(CollEngine, SmallOperationsOfOneTeamCompleteWhileAnotherTeamsLargeOneRuns) {
    AgentProcess agent({"--engines", "2"});
    Team a(agent, 2, "large", Memory::direct);
    Team b(agent, 2, "small", Memory::mapped);
    const size_t count = (64u << 20) / 4;
    std::vector<int32_t *> big(2);
    for (int r = 0; r < 2; ++r) {
        big[r] = reinterpret_cast<int32_t *>(a.buffer(r, count * 4));
        for (size_t i = 0; i < count; ++i) big[r][i] = int32_t(i * (r + 3)) ^ r;
    }
    std::vector<int64_t *> small(2);
    for (int r = 0; r < 2; ++r) small[r] = reinterpret_cast<int64_t *>(b.buffer(r, 8));

    std::vector<dp_request_t *> large(2);
    for (int r = 0; r < 2; ++r)
        ASSERT_EQ(dp_iallreduce(big[r], big[r], count, DP_INT32, DP_SUM, a[r].team, &large[r]), DP_OK);
    int small_done_while_large_ran = 0;
    bool large_done = false;
    for (int k = 0; k < 1000; ++k) {
        auto st = b.run([&](int r, dp_request_t **q) {
            *small[r] = int64_t(k) * 1000 + r;
            return dp_iallreduce(small[r], small[r], 1, DP_INT64, DP_SUM, b[r].team, q);
        });
        for (int r = 0; r < 2; ++r) {
            ASSERT_EQ(st[r], DP_OK) << "small op " << k;
            ASSERT_EQ(*small[r], int64_t(k) * 2000 + 1) << "small op " << k << " rank " << r;
        }
        if (!large_done) {
            int done0 = 0, done1 = 0;
            ASSERT_EQ(dp_test(large[0], &done0), DP_OK);
            ASSERT_EQ(dp_test(large[1], &done1), DP_OK);
            large_done = done0 && done1;
            if (!large_done) ++small_done_while_large_ran;
        }
    }
    for (int r = 0; r < 2; ++r) {
        ASSERT_EQ(dp_wait(large[r]), DP_OK);
        dp_request_free(large[r]);
    }
    EXPECT_GE(small_done_while_large_ran, 5)
        << "team B completed only " << small_done_while_large_ran
        << " of its operations while team A's 64 MiB allreduce ran";
    for (int r = 0; r < 2; ++r)
        for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(big[r][i], int32_t(int32_t(i * 3) + (int32_t(i * 4) ^ 1))) << "element " << i;
}

// A member whose queue at the agent is full gets DP_ERR_RETRY for the post
// that did not fit; posting it again once the team has run some of the
// queue completes it, matched with the others' same operation.
TEST(CollEngine, FullQueueIsReportedAsRetryAndThePostSucceedsWhenMadeAgain) {
    ConfiguredAgent agent("\"max_team_queue\": 2");
    Team team(*agent, 2, "queue");
    std::vector<int64_t *> buf(2);
    for (int r = 0; r < 2; ++r) {
        buf[r] = reinterpret_cast<int64_t *>(team.buffer(r, 3 * 8));
        for (int k = 0; k < 3; ++k) buf[r][k] = int64_t(k) * 10 + r;
    }
    // Rank 0 posts three before rank 1 posts anything: nothing can start,
    // two fit in its queue, the third does not.
    dp_request_t *r0[3], *r1[3];
    for (int k = 0; k < 3; ++k)
        ASSERT_EQ(dp_iallreduce(&buf[0][k], &buf[0][k], 1, DP_INT64, DP_SUM, team[0].team, &r0[k]),
                  DP_OK);
    EXPECT_EQ(dp_wait(r0[2]), DP_ERR_RETRY);
    dp_request_free(r0[2]);
    EXPECT_EQ(buf[0][2], 20) << "a refused post touched its buffer";
    for (int k = 0; k < 3; ++k)
        ASSERT_EQ(dp_iallreduce(&buf[1][k], &buf[1][k], 1, DP_INT64, DP_SUM, team[1].team, &r1[k]),
                  DP_OK);
    for (int k = 0; k < 2; ++k) {
        ASSERT_EQ(dp_wait(r0[k]), DP_OK) << "op " << k;
        dp_request_free(r0[k]);
    }
    ASSERT_EQ(dp_iallreduce(&buf[0][2], &buf[0][2], 1, DP_INT64, DP_SUM, team[0].team, &r0[2]),
              DP_OK);
    ASSERT_EQ(dp_wait(r0[2]), DP_OK);
    dp_request_free(r0[2]);
    for (int k = 0; k < 3; ++k) {
        ASSERT_EQ(dp_wait(r1[k]), DP_OK) << "op " << k;
        dp_request_free(r1[k]);
    }
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 3; ++k) EXPECT_EQ(buf[r][k], int64_t(k) * 20 + 1) << "rank " << r;
}

// The agent's copies of a member's vector counts are bounded in bytes: a
// team of 4 has 128-byte counts blocks, so 32 posts fill 4 KiB and the
// 33rd is answered DP_ERR_RETRY (its queue, 64 posts, had room), naming
// nothing it did not do; the 32 run once the others post theirs.
TEST(CollEngine, CountsCopiesBeyondTheirBoundAreReportedAsRetry) {
    ConfiguredAgent agent("\"max_queued_counts_bytes\": 4096");
    constexpr int kN = 4, kPosts = 33;
    Team team(*agent, kN, "counts-bound");
    std::vector<int32_t *> src(kN), dst(kN);
    const std::vector<size_t> counts(kN, 1), displs{0, 1, 2, 3};
    for (int r = 0; r < kN; ++r) {
        src[r] = reinterpret_cast<int32_t *>(team.buffer(r, kN * 4));
        dst[r] = reinterpret_cast<int32_t *>(team.buffer(r, kN * 4));
        for (int k = 0; k < kN; ++k) src[r][k] = r * 10 + k;
    }
    std::vector<std::vector<dp_request_t *>> req(kN, std::vector<dp_request_t *>(kPosts));
    for (int k = 0; k < kPosts; ++k)
        ASSERT_EQ(dp_ialltoallv(src[0], counts.data(), displs.data(), dst[0], counts.data(),
                                displs.data(), DP_INT32, team[0].team, &req[0][size_t(k)]),
                  DP_OK);
    EXPECT_EQ(dp_wait(req[0][kPosts - 1]), DP_ERR_RETRY);
    dp_request_free(req[0][kPosts - 1]);
    for (int r = 1; r < kN; ++r)
        for (int k = 0; k < kPosts - 1; ++k)
            ASSERT_EQ(dp_ialltoallv(src[r], counts.data(), displs.data(), dst[r], counts.data(),
                                    displs.data(), DP_INT32, team[r].team, &req[r][size_t(k)]),
                      DP_OK);
    for (int r = 0; r < kN; ++r)
        for (int k = 0; k < kPosts - 1; ++k) {
            ASSERT_EQ(dp_wait(req[r][size_t(k)]), DP_OK) << "rank " << r << " op " << k;
            dp_request_free(req[r][size_t(k)]);
        }
    for (int r = 0; r < kN; ++r)
        for (int k = 0; k < kN; ++k) EXPECT_EQ(dst[r][k], k * 10 + r) << "rank " << r;
}

// A member in registered memory is killed while the engines run the
// team's operations over its memory: the survivor gets DP_ERR_AGENT_LOST
// within the bound, the agent serves a new team, and the dead member's
// segment and descriptors go.
TEST(CollEngine, DirectMemberKilledMidOperationFailsItsTeamAndLeavesNothing) {
    AgentProcess agent({"--engines", "2"});
    ASSERT_TRUE(agent.running());
    const int fds_before = agent.settled_fds();
    constexpr int kOps = 8;
    const size_t count = (64u << 20) / 4;
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        dp_config_t config = agent.config();
        dp_context_t *ctx = nullptr;
        dp_team_t *team = nullptr;
        if (dp_init(&config, &ctx) != DP_OK || dp_team_create(ctx, "killed", 1, 2, &team) != DP_OK)
            _exit(2);
        auto *buf = static_cast<int32_t *>(aligned_alloc(64, count * 4));
        std::memset(buf, 1, count * 4);
        if (dp_mem_register(ctx, buf, count * 4) != DP_OK) _exit(3);
        dp_request_t *req[kOps];
        for (int k = 0; k < kOps; ++k)
            if (dp_iallreduce(buf, buf, count, DP_INT32, DP_SUM, team, &req[k]) != DP_OK) _exit(4);
        char c = 1;
        [[maybe_unused]] ssize_t n = write(ready[1], &c, 1);
        pause();  // killed by the parent while the operations run
        _exit(0);
    }
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    dp_team_t *team = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    ASSERT_EQ(dp_team_create(ctx, "killed", 0, 2, &team), DP_OK);
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    auto *buf = static_cast<int32_t *>(aligned_alloc(64, count * 4));
    std::memset(buf, 2, count * 4);
    ASSERT_EQ(dp_mem_register(ctx, buf, count * 4), DP_OK);
    dp_request_t *req[kOps];
    for (int k = 0; k < kOps; ++k)
        ASSERT_EQ(dp_iallreduce(buf, buf, count, DP_INT32, DP_SUM, team, &req[k]), DP_OK);
    // Kill as soon as the first operation is done: the second runs then.
    ASSERT_EQ(dp_wait(req[0]), DP_OK);
    const auto killed = Clock::now();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    int lost = 0;
    for (int k = 1; k < kOps; ++k) {
        const dp_status_t s = dp_wait(req[k]);
        if (lost) {
            EXPECT_EQ(s, DP_ERR_AGENT_LOST) << "op " << k << " after a lost one";
        } else {
            EXPECT_TRUE(s == DP_OK || s == DP_ERR_AGENT_LOST) << "op " << k << ": " << s;
        }
        lost += s == DP_ERR_AGENT_LOST;
    }
    EXPECT_LE(ms_since(killed), 2000);
    EXPECT_GE(lost, kOps - 2) << "the member died while its operations ran";
    for (auto *q : req) dp_request_free(q);
    EXPECT_EQ(dp_team_destroy(team), DP_OK);
    EXPECT_EQ(dp_mem_deregister(ctx, buf), DP_OK);
    free(buf);
    dp_finalize(ctx);
    close(ready[0]);
    close(ready[1]);

    // The agent goes on serving: a new team's direct allreduce is exact.
    {
        Team fresh(agent, 2, "after", Memory::direct);
        std::vector<int64_t *> v(2);
        for (int r = 0; r < 2; ++r) {
            v[r] = reinterpret_cast<int64_t *>(fresh.buffer(r, 4096 * 8));
            for (int i = 0; i < 4096; ++i) v[r][i] = int64_t(i) * (r + 1);
        }
        auto st = fresh.run([&](int r, dp_request_t **q) {
            return dp_iallreduce(v[r], v[r], 4096, DP_INT64, DP_SUM, fresh[r].team, q);
        });
        for (int r = 0; r < 2; ++r) {
            ASSERT_EQ(st[r], DP_OK);
            for (int i = 0; i < 4096; ++i) ASSERT_EQ(v[r][i], int64_t(i) * 3);
        }
    }
    EXPECT_TRUE(eventually([&] { return agent.count_fds() == fds_before; }, 5000))
        << agent.count_fds() << " fds, " << fds_before << " before";
    EXPECT_TRUE(eventually([&] { return agent.count_client_mappings() == 0; }, 5000))
        << agent.count_client_mappings() << " client segments still mapped";
    EXPECT_TRUE(agent.alive());
}

// A client that attached but allocated nothing costs the node little memory
// (whatever its pool's size); what it allocates is committed as it does.
TEST(CollEngine, AnAttachedClientCommitsLittleUntilItAllocates) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    constexpr int kClients = 8;
    constexpr uint64_t kMaxPerClient = 4ull << 20;
    dp_config_t config = agent.config();
    config.pool_bytes = 0;  // the agent's default (64 MiB)
    std::vector<dp_context_t *> ctx(kClients);
    for (auto &c : ctx) ASSERT_EQ(dp_init(&config, &c), DP_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // (nothing populates behind)
    const uint64_t idle = committed_client_bytes(agent);
    EXPECT_LE(idle, kClients * kMaxPerClient) << idle / kClients << " bytes per idle client";
    for (auto *c : ctx) {
        void *p = dp_malloc(c, 8 << 20);
        ASSERT_NE(p, nullptr);
        std::memset(p, 1, 8 << 20);
    }
    // The measure sees pages the clients touched (or this test proves nothing).
    EXPECT_GE(committed_client_bytes(agent), idle + kClients * (8ull << 20));
    for (auto *c : ctx) dp_finalize(c);
}

// 128 processes call dp_init at the same moment, allocate 1 MiB and leave,
// ten times over: every one attaches, and the agent's fds and client
// segments return to where they started.
TEST(CollEngine, HundredTwentyEightProcessesAttachAtOnceTenTimes) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    const int fds_before = agent.settled_fds();
    const long rss_before_kib = agent.rss_kib();
    constexpr int kProcesses = 128;
    for (int round = 0; round < 10; ++round) {
        int go[2];
        ASSERT_EQ(pipe(go), 0);
        std::vector<pid_t> pids;
        for (int i = 0; i < kProcesses; ++i) {
            pid_t pid = fork();
            ASSERT_GE(pid, 0);
            if (pid == 0) {
                close(go[1]);
                char c;
                if (read(go[0], &c, 1) != 0) _exit(9);  // released together when the pipe closes
                dp_config_t config = agent.config();
                config.pool_bytes = 0;  // the agent's default
                dp_context_t *ctx = nullptr;
                const dp_status_t s = dp_init(&config, &ctx);
                if (s != DP_OK) _exit(10 + (-s & 0x3f));
                void *p = dp_malloc(ctx, 1 << 20);
                if (!p) _exit(3);
                std::memset(p, 7, 1 << 20);
                dp_free(ctx, p);
                dp_finalize(ctx);
                _exit(0);
            }
            pids.push_back(pid);
        }
        close(go[0]);
        close(go[1]);  // go
        int failed = 0;
        std::string codes;
        for (pid_t pid : pids) {
            int status = 0;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                ++failed;
                codes += " " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            }
        }
        ASSERT_EQ(failed, 0) << "round " << round << ": exit codes" << codes
                             << " (10+n: dp_init returned -n)";
    }
    EXPECT_TRUE(eventually([&] { return agent.count_fds() == fds_before; }, 5000))
        << agent.count_fds() << " fds, " << fds_before << " before";
    EXPECT_TRUE(eventually([&] { return agent.count_client_mappings() == 0; }, 5000));
    EXPECT_EQ(committed_client_bytes(agent), 0u);
#if !defined(__SANITIZE_ADDRESS__)
    EXPECT_LE(agent.rss_kib(), rss_before_kib + (16 << 10)) << "agent RSS grew";
#else
    (void)rss_before_kib;
#endif
    EXPECT_TRUE(agent.alive());
}

}  // namespace
