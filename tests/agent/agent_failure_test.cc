// Refusals and failures: authentication, hostile bytes on the control
// socket, and an agent that dies or stops under its clients.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include "agent_test_util.h"
#include "channel/control.h"
#include "channel/transport/uds/transport.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::target_shell;
namespace control = deputy::channel::control;
using deputy::channel::MsgType;

// Runs `deputy agent ARGS` that is expected to refuse to start; returns what
// it printed and, in *status, its exit status.
std::string run_agent_until_exit(const std::string &args, int *status) {
    const std::string cmd = target_shell(std::string(DEPUTY_BIN) + " agent " + args + " 2>&1");
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) {
        *status = -1;
        return "popen failed";
    }
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    *status = WEXITSTATUS(pclose(p));
    return out;
}

int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 since)
        .count();
}

TEST(AgentAuth, TokenIsRequiredWhenConfigured) {
    std::string dir = deputy::testing::make_private_dir();
    std::string token_file = dir + "/token";
    std::ofstream(token_file) << "job-7f3a9c\n";
    AgentProcess agent({"--token-file", token_file});
    ASSERT_TRUE(agent.running());
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    config.token = "";
    EXPECT_EQ(dp_init(&config, &ctx), DP_ERR_DENIED);
    config.token = "job-7f3a9d";
    EXPECT_EQ(dp_init(&config, &ctx), DP_ERR_DENIED);
    EXPECT_EQ(ctx, nullptr);
    config.token = "job-7f3a9c";
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    EXPECT_EQ(dp_finalize(ctx), DP_OK);
    std::remove(token_file.c_str());
    rmdir(dir.c_str());
}

TEST(AgentAuth, AnotherUserIsRefused) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    // The 0700 directory already keeps other users out (EACCES); give the
    // other user a way in so the agent's own SO_PEERCRED check is what refuses.
    ASSERT_EQ(chmod(agent.dir().c_str(), 0755), 0);
    ASSERT_EQ(chmod(agent.socket().c_str(), 0777), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
        dp_config_t config = agent.config();
        dp_context_t *ctx = nullptr;
        dp_status_t s = dp_init(&config, &ctx);
        _exit(s == DP_ERR_DENIED ? 0 : 20 + int(-s));
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "dp_init as uid 65534 did not get DP_ERR_DENIED";
}

TEST(AgentAuth, RefusesToStartInAPublicDirectory) {
    std::string dir = deputy::testing::make_private_dir();
    ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
    int status = 0;
    std::string out = run_agent_until_exit("--socket " + dir + "/a.sock", &status);
    EXPECT_NE(status, 0);
    EXPECT_NE(out.find("mode 0755"), std::string::npos) << out;
    EXPECT_NE(out.find("chmod 700"), std::string::npos) << out;
    rmdir(dir.c_str());
}

// Raw bytes on the control socket: the agent drops the connection, logs
// why, and keeps serving everyone else.
class HostileBytes : public ::testing::Test {
  protected:
    AgentProcess agent;
    deputy::UniqueFd connect() {
        deputy::UniqueFd fd;
        EXPECT_EQ(deputy::channel::uds::connect_fd(agent.socket(), 1'000'000'000, &fd), DP_OK);
        return fd;
    }
    // True when the agent closed the connection within a second.
    static bool closed_by_agent(int fd) {
        for (int i = 0; i < 200; ++i) {
            char c;
            ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
            if (n == 0) return true;
            if (n < 0 && errno != EAGAIN) return true;
            usleep(5000);
        }
        return false;
    }
    void expect_agent_serves() {
        dp_config_t config = agent.config();
        dp_context_t *ctx = nullptr;
        ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
        dp_finalize(ctx);
    }
};

TEST_F(HostileBytes, GarbageInsteadOfAFrame) {
    auto fd = connect();
    const char junk[] = "GET / HTTP/1.1\r\n\r\n";
    ASSERT_EQ(send(fd.get(), junk, sizeof(junk), MSG_NOSIGNAL), ssize_t(sizeof(junk)));
    EXPECT_TRUE(closed_by_agent(fd.get()));
    expect_agent_serves();
}

TEST_F(HostileBytes, HugeLengthIsRefusedWithoutAllocating) {
    auto fd = connect();
    uint8_t header[8];
    deputy::channel::encode_frame_header(header, MsgType::kAttach, 0xfffffff0u);
    ASSERT_EQ(send(fd.get(), header, 8, MSG_NOSIGNAL), 8);
    EXPECT_TRUE(closed_by_agent(fd.get()));
    expect_agent_serves();
}

TEST_F(HostileBytes, RequestBeforeAttachIsRefused) {
    auto fd = connect();
    std::vector<uint8_t> payload;
    control::encode(control::Register{0x1000, 4096, control::RegionKind::kDirect}, &payload);
    ASSERT_EQ(control::send_message(fd.get(), MsgType::kRegister, payload, nullptr, 0,
                                    1'000'000'000, "test"),
              DP_OK);
    MsgType type;
    std::vector<uint8_t> answer;
    ASSERT_EQ(control::recv_message(fd.get(), control::kMaxControlMessage, &type, &answer, nullptr,
                                    0, nullptr, 1'000'000'000, "test"),
              DP_OK);
    ASSERT_EQ(type, MsgType::kReply);
    control::Reply reply;
    std::string error;
    ASSERT_EQ(control::decode(answer.data(), answer.size(), &reply, &error), DP_OK);
    EXPECT_EQ(reply.status, DP_ERR_INVALID);
    EXPECT_NE(reply.reason.find("expected ATTACH"), std::string::npos) << reply.reason;
    EXPECT_TRUE(closed_by_agent(fd.get()));
    expect_agent_serves();
}

TEST_F(HostileBytes, TruncatedAttachAndForgedRangeCounts) {
    {
        auto fd = connect();
        std::vector<uint8_t> payload = {1, 0, 0};  // 3 bytes of a 20-byte ATTACH
        ASSERT_EQ(control::send_message(fd.get(), MsgType::kAttach, payload, nullptr, 0,
                                        1'000'000'000, "test"),
                  DP_OK);
        EXPECT_TRUE(closed_by_agent(fd.get()));
    }
    {
        // Attached, then a STAGED message claiming a range longer than sent.
        dp_config_t config = agent.config();
        dp_context_t *ctx = nullptr;
        ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
        auto fd = connect();
        std::vector<uint8_t> payload;
        control::encode(control::Attach{}, &payload);
        ASSERT_EQ(control::send_message(fd.get(), MsgType::kAttach, payload, nullptr, 0,
                                        1'000'000'000, "test"),
                  DP_OK);
        MsgType type;
        std::vector<uint8_t> answer;
        deputy::UniqueFd fds[2];
        size_t nfds = 0;
        ASSERT_EQ(control::recv_message(fd.get(), control::kMaxControlMessage, &type, &answer, fds,
                                        2, &nfds, 1'000'000'000, "test"),
                  DP_OK);
        ASSERT_EQ(type, MsgType::kAttached);
        control::Staged staged;
        staged.desc.opcode = DP_OP_MEMMOVE;
        staged.sources.push_back({0x1000, std::vector<uint8_t>(16)});
        payload.clear();
        control::encode(staged, &payload);
        payload[64 + 8 + 8] = 0xff;  // the range's length: now far more than was sent
        ASSERT_EQ(control::send_message(fd.get(), MsgType::kStaged, payload, nullptr, 0,
                                        1'000'000'000, "test"),
                  DP_OK);
        ASSERT_EQ(control::recv_message(fd.get(), control::kMaxControlMessage, &type, &answer,
                                        nullptr, 0, nullptr, 1'000'000'000, "test"),
                  DP_OK);
        ASSERT_EQ(type, MsgType::kStagedResult);
        control::StagedResult result;
        std::string error;
        ASSERT_EQ(control::decode(answer.data(), answer.size(), &result, &error), DP_OK);
        EXPECT_EQ(result.status, DP_ERR_INVALID);
        // The other client was not disturbed.
        EXPECT_EQ(dp_agent_check(ctx), DP_OK);
        dp_finalize(ctx);
    }
    expect_agent_serves();
}

// An agent killed outright: every pending and later call of its clients
// fails with DP_ERR_AGENT_LOST within the bound (1 s by default).
TEST(AgentLost, KilledAgentIsNoticedWithinTheBound) {
    for (dp_wait_mode_t mode : {DP_WAIT_SPIN, DP_WAIT_BLOCK}) {
        AgentProcess agent;
        ASSERT_TRUE(agent.running());
        dp_config_t config = agent.config();
        dp_context_t *ctx = nullptr;
        ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
        dp_mover_t *mover = nullptr;
        ASSERT_EQ(dp_mover_attach(ctx, &mover), DP_OK);
        // A record nobody will ever complete: the wait must still end.
        auto *record = static_cast<dp_completion_t *>(dp_malloc(ctx, 32));
        std::memset(record, 0, 32);
        auto start = std::chrono::steady_clock::now();
        std::thread killer([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            agent.stop(SIGKILL);
        });
        EXPECT_EQ(dp_mover_wait(mover, record, mode, -1), DP_ERR_AGENT_LOST);
        int64_t waited = elapsed_ms(start) - 100;
        killer.join();
        EXPECT_LE(waited, 1000) << "wait mode " << int(mode);
        // Later calls too.
        dp_desc_t d{};
        d.opcode = DP_OP_NOOP;
        EXPECT_EQ(dp_mover_submit(mover, 0, &d), DP_ERR_AGENT_LOST);
        std::vector<char> buf(64);
        EXPECT_EQ(dp_mem_register(ctx, buf.data(), buf.size()), DP_ERR_AGENT_LOST);
        EXPECT_EQ(dp_agent_check(ctx), DP_ERR_AGENT_LOST);
        EXPECT_EQ(dp_mover_close(mover), DP_OK);
        EXPECT_EQ(dp_finalize(ctx), DP_OK);
    }
}

TEST(AgentLost, StoppedAgentTellsClientsAndRemovesItsSocket) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    dp_mover_t *mover = nullptr;
    ASSERT_EQ(dp_mover_attach(ctx, &mover), DP_OK);
    auto *record = static_cast<dp_completion_t *>(dp_malloc(ctx, 32));
    std::memset(record, 0, 32);
    auto start = std::chrono::steady_clock::now();
    std::thread stopper([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_EQ(agent.stop(SIGTERM), 0);  // exit status 0: a clean shutdown
    });
    EXPECT_EQ(dp_mover_wait(mover, record, DP_WAIT_BLOCK, 5'000'000'000), DP_ERR_AGENT_LOST);
    EXPECT_LE(elapsed_ms(start) - 100, 1000);
    stopper.join();
    struct stat st;
    EXPECT_NE(stat(agent.socket().c_str(), &st), 0) << "socket file left behind";
    dp_mover_close(mover);
    dp_finalize(ctx);
}

TEST(AgentLost, NoAgentIsReportedAsSuch) {
    std::string dir = deputy::testing::make_private_dir();
    std::string socket = dir + "/nobody.sock";
    dp_config_t config = DP_CONFIG_INITIALIZER;
    config.agent = socket.c_str();
    config.connect_timeout_ms = 50;
    dp_context_t *ctx = nullptr;
    EXPECT_EQ(dp_init(&config, &ctx), DP_ERR_NO_AGENT);
    EXPECT_EQ(ctx, nullptr);
    rmdir(dir.c_str());
}

TEST(AgentConfigErrors, BadConfigNamesTheKey) {
    struct Case {
        const char *config, *message;
    };
    for (const Case &c : {Case{R"({"agent": {"pool_bytes": "big"}})",
                               "agent.pool_bytes: expected a non-negative integer, got string"},
                          Case{R"({"agent": {"idle_poll": "spin"}})",
                               "agent.idle_poll: 'spin' is not pause or yield"},
                          Case{R"({"agent": {"backend": "dsa"}})",
                               "agent.backend: 'dsa' is not 'software' or 'idxd'"},
                          Case{R"({"agent": {"idxd_queue": "dsa0/wq0.0"}})",
                               "idxd_queue 'dsa0/wq0.0' is set but backend is not 'idxd'"},
                          Case{R"({"agent": {"test_stand_in_key": "big"}})",
                               "test_stand_in_key and test_stand_in_block go together"},
                          Case{R"({"agent": {"test_stand_in_block": 16385}})",
                               "agent.test_stand_in_block: 16385 is above the limit 16384"}}) {
        std::string dir = deputy::testing::make_private_dir();
        std::string file = dir + "/agent.json";
        std::ofstream(file) << c.config;
        int status = 0;
        std::string out = run_agent_until_exit("--socket " + dir + "/a.sock --config " + file, &status);
        EXPECT_NE(status, 0) << c.config;
        EXPECT_NE(out.find(c.message), std::string::npos) << out;
        EXPECT_NE(access((dir + "/a.sock").c_str(), F_OK), 0) << "socket left by " << c.config;
        std::remove(file.c_str());
        rmdir(dir.c_str());
    }
}

}  // namespace
