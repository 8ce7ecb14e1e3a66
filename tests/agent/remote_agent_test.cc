// A client reaching its agent over TCP (DEPUTY_AGENT=tcp://HOST:PORT), as a
// host reaches an agent on its DPU: the secure session with the operator's
// key, staged mover operations checked byte for byte beside a local client,
// and the agent holding against what the network brings — a wrong key, a
// peer speaking in clear, silent connections, a client that goes, an agent
// that dies — with nothing leaked.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <vector>

#include "agent_test_util.h"
#include "remote_agent.h"
#include "channel/agent_info.h"
#include "channel/control.h"
#include "channel/key_file.h"
#include "channel/secure.h"
#include "channel/transport/tcp/transport.h"
#include "common/log_quiet.h"

namespace {

using deputy::testing::AgentConfig;
using deputy::testing::AgentProcess;
using deputy::testing::eventually;
using namespace deputy::testing::remote;

struct Client {
    dp_context_t *ctx = nullptr;
    dp_mover_t *mover = nullptr;
    dp_status_t init = DP_ERR_INTERNAL;
    explicit Client(dp_config_t config) {
        init = dp_init(&config, &ctx);
        if (init == DP_OK && dp_mover_attach(ctx, &mover) != DP_OK) mover = nullptr;
    }
    ~Client() {
        if (mover) dp_mover_close(mover);
        if (ctx) dp_finalize(ctx);
    }
    // Runs `d` to completion; the record's status (0 when the call failed).
    uint8_t run(dp_desc_t d, dp_completion_t *record, dp_status_t *call = nullptr) {
        std::memset(record, 0, sizeof *record);
        d.flags |= DP_FLAG_COMPLETION;
        d.completion = reinterpret_cast<uint64_t>(record);
        dp_status_t s = dp_mover_submit(mover, 0, &d);
        if (s == DP_OK) s = dp_mover_wait(mover, record, DP_WAIT_YIELD, 10'000'000'000);
        if (call) *call = s;
        return s == DP_OK ? record->status : 0;
    }
};

dp_desc_t descriptor(uint8_t opcode, const void *src, void *dst, uint64_t size) {
    dp_desc_t d{};
    d.opcode = opcode, d.size = size;
    d.src = reinterpret_cast<uint64_t>(src), d.dst = reinterpret_cast<uint64_t>(dst);
    return d;
}

// A memmove of `bytes` ordinary bytes through `c`, checked.
void expect_memmove(Client &c, size_t bytes) {
    alignas(32) dp_completion_t record{};
    std::vector<uint8_t> a(bytes), b(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) a[i] = uint8_t(i * 13 + 1);
    EXPECT_EQ(c.run(descriptor(DP_OP_MEMMOVE, a.data(), b.data(), bytes), &record),
              DP_COMP_SUCCESS);
    EXPECT_EQ(a, b);
}

TEST(RemoteAgentTest, StagedMoverOperationsOverTheSecureSessionBesideALocalClient) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    const int idle_fds = r.agent->settled_fds();
    {
        Env key("DEPUTY_KEY", r.key.path());
        Client remote(r.config());
        ASSERT_EQ(remote.init, DP_OK);
        ASSERT_NE(remote.mover, nullptr);
        Client local(r.agent->config());
        ASSERT_EQ(local.init, DP_OK);
        alignas(32) dp_completion_t record{};

        // A memmove of an odd size (up to the agent's max_staged_bytes, 1
        // MiB: the bytes travel in one message), and a float32 sum.
        const size_t n = (1 << 20) - 1;
        std::vector<uint8_t> src(n), dst(n, 0);
        for (size_t i = 0; i < n; ++i) src[i] = uint8_t(i * 31 + 7);
        EXPECT_EQ(remote.run(descriptor(DP_OP_MEMMOVE, src.data(), dst.data(), n), &record),
                  DP_COMP_SUCCESS);
        EXPECT_EQ(record.bytes_completed, n);
        EXPECT_EQ(src, dst);
        std::vector<float> acc(4097), inc(4097);
        std::iota(acc.begin(), acc.end(), 0.0f);
        std::fill(inc.begin(), inc.end(), 0.5f);
        dp_desc_t reduce = descriptor(DP_OP_REDUCE, inc.data(), acc.data(), 4097 * 4);
        reduce.dtype = DP_FLOAT32, reduce.redop = DP_SUM, reduce.flags = DP_FLAG_ACCUMULATE;
        EXPECT_EQ(remote.run(reduce, &record), DP_COMP_SUCCESS);
        size_t wrong = 0;
        for (size_t i = 0; i < acc.size(); ++i) wrong += acc[i] != float(i) + 0.5f;
        EXPECT_EQ(wrong, 0u);
        // Compare (src against src2): equal, then one byte off at a known place.
        dp_desc_t compare = descriptor(DP_OP_COMPARE, src.data(), nullptr, n);
        compare.src2 = reinterpret_cast<uint64_t>(dst.data());
        EXPECT_EQ(remote.run(compare, &record), DP_COMP_SUCCESS);
        EXPECT_EQ(record.result, 0u);
        dst[777777] ^= 1;
        EXPECT_EQ(remote.run(compare, &record), DP_COMP_FALSE_PREDICATE);
        EXPECT_EQ(record.result, 1u);
        EXPECT_EQ(record.value, 777777u);  // the first differing offset

        // Beyond max_staged_bytes: refused by name, nothing sent.
        std::vector<uint8_t> big(n + 2);
        dp_desc_t too_big = descriptor(DP_OP_MEMMOVE, big.data(), big.data(), n + 2);
        EXPECT_EQ(dp_mover_submit(remote.mover, 0, &too_big), DP_ERR_TOO_LARGE);

        // The local client is served meanwhile, as ever (in its mapped pool).
        auto *a = static_cast<uint8_t *>(dp_malloc(local.ctx, 8192));
        auto *local_record = static_cast<dp_completion_t *>(dp_malloc(local.ctx, 32));
        ASSERT_TRUE(a && local_record);
        std::memset(a, 9, 4096);
        std::memset(a + 4096, 0, 4096);
        EXPECT_EQ(local.run(descriptor(DP_OP_MEMMOVE, a, a + 4096, 4096), local_record),
                  DP_COMP_SUCCESS);
        EXPECT_EQ(std::memcmp(a, a + 4096, 4096), 0);

        // What the agent says of it: a remote client over the secure session.
        nlohmann::json j = info(*r.agent);
        ASSERT_TRUE(j.contains("listen")) << j.dump();
        EXPECT_EQ(j["listen"]["address"], r.address);
        EXPECT_EQ(j["listen"]["secure"], true);
        EXPECT_EQ(j["listen"]["admitted"], 1);
        int remotes = 0;
        for (const auto &c : j["clients"])
            if (c["remote"] != "") {
                ++remotes;
                EXPECT_EQ(c["identity"], "secure session");
                EXPECT_EQ(c["staged"], 4);
            }
        EXPECT_EQ(remotes, 1) << j.dump();
    }
    // Both gone: the relay's threads and sockets with the remote one.
    expect_fds_back(*r.agent, idle_fds);
}

TEST(RemoteAgentTest, WrongKeyNoKeyAndClearTextAreRefused) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    {
        KeyFile other;
        Env key("DEPUTY_KEY", other.path());
        Client c(r.config());
        EXPECT_EQ(c.init, DP_ERR_DENIED);
    }
    {
        Client c(r.config());  // no DEPUTY_KEY
        EXPECT_EQ(c.init, DP_ERR_INVALID);
    }
    {
        // A client in clear at a secure agent: the handshake fails, nothing attaches.
        Env clear("DEPUTY_INSECURE_TCP", "1");
        Client c(r.config());
        EXPECT_EQ(c.init, DP_ERR_DENIED);
    }
    EXPECT_TRUE(eventually([&] { return info(*r.agent)["listen"]["failed_handshakes"] == 2; }))
        << info(*r.agent).dump();
    // The right key still works afterwards.
    Env key("DEPUTY_KEY", r.key.path());
    Client c(r.config());
    ASSERT_EQ(c.init, DP_OK);
    expect_memmove(c, 100);
}

// Anyone on the network can fail a handshake at will: 200 with a wrong key
// (and 20 that close at once) cost the agent's log a few rate-limited lines
// that name the reason, not a line or two per attempt.
TEST(RemoteAgentTest, AFloodOfFailedHandshakesCostsAFewLogLines) {
    RemoteAgent r({"-l", "40"}, true, true);  // warnings: where the gate's lines are
    ASSERT_TRUE(r.agent->running());
    namespace ch = deputy::channel;
    KeyFile other;
    ch::secure::Key wrong;
    ASSERT_EQ(ch::secure::load_key_file(other.path(), &wrong), DP_OK);
    constexpr int kWrong = 200, kClosed = 20;
    {
        deputy::log::Quiet quiet;  // the attacker's own failures: not this test's output
        for (int i = 0; i < kWrong; ++i) {
            std::unique_ptr<ch::Transport> inner, secured;
            ASSERT_EQ(ch::tcp::connect("127.0.0.1:" + r.port, {}, 2'000'000'000, &inner), DP_OK);
            EXPECT_EQ(ch::secure::establish(std::move(inner), wrong, ch::secure::Role::kInitiator,
                                            2'000'000'000, &secured),
                      DP_ERR_DENIED);
        }
        for (int i = 0; i < kClosed; ++i) {
            deputy::UniqueFd fd;
            ASSERT_EQ(ch::tcp::connect_fd("127.0.0.1:" + r.port, 1'000'000'000, &fd), DP_OK);
        }
    }
    EXPECT_TRUE(eventually(
        [&] { return info(*r.agent)["listen"]["failed_handshakes"] == kWrong + kClosed; }, 10000))
        << info(*r.agent).dump();
    std::ifstream file(r.agent->log_path());
    std::stringstream text;
    text << file.rdbuf();
    std::istringstream in(text.str());
    std::string line, reasons;
    int lines = 0, session_lines = 0;
    while (std::getline(in, line)) {
        ++lines;
        if (line.find("secure") != std::string::npos &&
            line.find("remote connection") == std::string::npos)
            ++session_lines;  // a line of the session's own: one per attempt
        if (line.find("remote connection from") != std::string::npos && reasons.empty())
            reasons = line;
    }
    EXPECT_EQ(session_lines, 0);
    EXPECT_LE(lines, 60) << "the agent logged " << lines << " lines";
    EXPECT_NE(reasons.find("does not hold the same key"), std::string::npos)
        << text.str();
}

TEST(RemoteAgentTest, InClearOnlyWhenBothEndsAskForIt) {
    RemoteAgent r({}, false);
    ASSERT_TRUE(r.agent->running());
    Env clear("DEPUTY_INSECURE_TCP", "1");
    Client c(r.config());
    ASSERT_EQ(c.init, DP_OK);
    expect_memmove(c, 5000);
    EXPECT_EQ(info(*r.agent)["listen"]["secure"], false);
}

TEST(RemoteAgentTest, SilentConnectionsDoNotKeepAClientOut) {
    AgentConfig cfg(R"("max_handshakes": 4, "handshake_timeout_ms": 20000)");
    RemoteAgent r({"--config", cfg.path()});
    ASSERT_TRUE(r.agent->running());
    // Ten connections that never speak: each would hold its handshake for 20 s.
    std::vector<deputy::UniqueFd> silent;
    for (int i = 0; i < 10; ++i) {
        deputy::UniqueFd fd;
        ASSERT_EQ(deputy::channel::tcp::connect_fd("127.0.0.1:" + r.port, 1'000'000'000, &fd),
                  DP_OK);
        silent.push_back(std::move(fd));
    }
    EXPECT_TRUE(eventually([&] { return info(*r.agent)["listen"]["connections"] == 10; }));
    // A real client still attaches at once: newer connections cut the oldest.
    Env key("DEPUTY_KEY", r.key.path());
    Client c(r.config());
    ASSERT_EQ(c.init, DP_OK);
    nlohmann::json j = info(*r.agent);
    EXPECT_GE(j["listen"]["evicted_handshakes"], 6) << j.dump();
    EXPECT_EQ(j["listen"]["admitted"], 1);
}

TEST(RemoteAgentTest, AnAuthenticatedPeerThatBreaksTheProtocolHurtsOnlyItself) {
    namespace ch = deputy::channel;
    namespace control = ch::control;
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    Client bystander(r.config());
    ASSERT_EQ(bystander.init, DP_OK);
    const int fds_before = r.agent->settled_fds();
    {
        // Speaking before ATTACH: told so, then closed.
        auto t = authenticated(r, 1 << 20);
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(t->send(ch::MsgType::kStaged, "junk", 4, 1'000'000'000), DP_OK);
        std::vector<uint8_t> answer;
        ASSERT_EQ(next(*t, &answer), ch::MsgType::kReply);
        control::Reply reply;
        std::string error;
        ASSERT_EQ(control::decode(answer.data(), answer.size(), &reply, &error), DP_OK);
        EXPECT_EQ(reply.status, DP_ERR_INVALID);
        EXPECT_EQ(reply.reason, "expected ATTACH first, got STAGED");
        EXPECT_EQ(next(*t), std::nullopt);
    }
    {
        // Attached, then a STAGED that does not decode: refused by name.
        auto t = authenticated(r, 1 << 20);
        ASSERT_NE(t, nullptr);
        std::vector<uint8_t> payload;
        control::encode(control::Attach{}, &payload);
        ASSERT_EQ(t->send(ch::MsgType::kAttach, payload.data(), payload.size(), 1'000'000'000),
                  DP_OK);
        ASSERT_EQ(next(*t), ch::MsgType::kAttached);
        ASSERT_EQ(t->send(ch::MsgType::kStaged, "\x01\x02\x03", 3, 1'000'000'000), DP_OK);
        const auto answer = next(*t);
        ASSERT_TRUE(answer == ch::MsgType::kReply || answer == ch::MsgType::kStagedResult);
    }
    {
        // A message above the control protocol's limit: the session ends.
        auto t = authenticated(r, 16 << 20);
        ASSERT_NE(t, nullptr);
        std::vector<uint8_t> huge(8 << 20, 7);
        t->send(ch::MsgType::kAttach, huge.data(), huge.size(), 2'000'000'000);
        EXPECT_EQ(next(*t), std::nullopt);
    }
    {
        // Half a message, then gone.
        deputy::UniqueFd fd;
        ASSERT_EQ(ch::tcp::connect_fd("127.0.0.1:" + r.port, 2'000'000'000, &fd), DP_OK);
        const char half[5] = {1, 0, 0, 0, 9};
        ASSERT_EQ(::send(fd.get(), half, sizeof half, MSG_NOSIGNAL), 5);
    }
    // The bystander is served throughout, and everything the others held is given back.
    expect_memmove(bystander, 4096);
    EXPECT_TRUE(eventually([&] { return info(*r.agent)["clients"].size() == 1; }, 5000))
        << info(*r.agent).dump();
    expect_memmove(bystander, 100);
    expect_fds_back(*r.agent, fds_before);
}

TEST(RemoteAgentTest, WhatARemoteClientCannotHaveIsRefusedByNameAndRegisteringIsANoOp) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    Client c(r.config());
    ASSERT_EQ(c.init, DP_OK);
    // Registering ordinary memory has nothing to do (every operation takes
    // its bytes per post) and says so with DP_OK: a program written for a
    // local agent runs unchanged. The memory then works as any other.
    std::vector<uint8_t> buffer(8192, 0);
    EXPECT_EQ(dp_mem_register(c.ctx, buffer.data(), buffer.size()), DP_OK);
    std::memset(buffer.data(), 0x3c, 4096);
    {
        alignas(32) dp_completion_t done{};
        EXPECT_EQ(c.run(descriptor(DP_OP_MEMMOVE, buffer.data(), buffer.data() + 4096, 4096),
                        &done),
                  DP_COMP_SUCCESS);
        EXPECT_EQ(std::memcmp(buffer.data(), buffer.data() + 4096, 4096), 0);
    }
    EXPECT_EQ(dp_mem_deregister(c.ctx, buffer.data()), DP_OK);
    EXPECT_EQ(dp_mem_register(c.ctx, nullptr, 64), DP_ERR_INVALID);
    // dp_malloc hands out this process's own memory, which travels staged.
    auto *pool = static_cast<uint8_t *>(dp_malloc(c.ctx, 8192));
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(dp_mem_mapped(c.ctx, pool, 8192), 0);
    std::memset(pool, 0x5a, 4096);
    std::memset(pool + 4096, 0, 4096);
    alignas(32) dp_completion_t record{};
    EXPECT_EQ(c.run(descriptor(DP_OP_MEMMOVE, pool, pool + 4096, 4096), &record),
              DP_COMP_SUCCESS);
    EXPECT_EQ(std::memcmp(pool, pool + 4096, 4096), 0);
    dp_free(c.ctx, pool);
    unsigned char mask[128];
    EXPECT_EQ(dp_agent_cpus(c.ctx, mask, sizeof mask), DP_ERR_UNSUPPORTED);
    // Still attached and served after all of that.
    expect_memmove(c, 64);
}

TEST(RemoteAgentTest, AnAgentThatDiesIsNoticedWithinTheBound) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    dp_config_t config = r.config();
    config.lost_timeout_ms = 500;
    Client c(config);
    ASSERT_EQ(c.init, DP_OK);
    r.agent->stop(SIGKILL);
    alignas(32) dp_completion_t record{};
    std::vector<uint8_t> a(64, 5), b(64, 0);
    const auto start = std::chrono::steady_clock::now();
    dp_status_t call = DP_OK;
    EXPECT_EQ(c.run(descriptor(DP_OP_MEMMOVE, a.data(), b.data(), 64), &record, &call), 0);
    EXPECT_EQ(call, DP_ERR_AGENT_LOST);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

// Two network namespaces joined by a veth pair: "dpu" (10.78.0.1) for the
// agent, "host" (10.78.0.2) for the client. Needs root and `ip`.
struct HostAndDpu {
    HostAndDpu() {
        const std::string id = std::to_string(getpid());
        dpu = "dpdpu" + id, host = "dphost" + id, veth_dpu = "dpd" + id, veth_host = "dph" + id;
        for (const std::string &step :
             {"ip netns add " + dpu, "ip netns add " + host,
              "ip link add " + veth_dpu + " type veth peer name " + veth_host,
              "ip link set " + veth_dpu + " netns " + dpu,
              "ip link set " + veth_host + " netns " + host,
              "ip -n " + dpu + " addr add 10.78.0.1/24 dev " + veth_dpu,
              "ip -n " + host + " addr add 10.78.0.2/24 dev " + veth_host,
              "ip -n " + dpu + " link set " + veth_dpu + " up",
              "ip -n " + host + " link set " + veth_host + " up",
              "ip -n " + dpu + " link set lo up"})
            if (std::system((step + " 2>/dev/null").c_str()) != 0) {
                error = "'" + step + "' failed";
                return;
            }
    }
    ~HostAndDpu() {
        [[maybe_unused]] int a = std::system(("ip netns del " + dpu + " 2>/dev/null").c_str());
        [[maybe_unused]] int b = std::system(("ip netns del " + host + " 2>/dev/null").c_str());
    }
    std::string dpu, host, veth_dpu, veth_host, error;
};

// Runs `f` with this thread in network namespace `name` (the sockets it
// makes stay there), then back in the test's own.
template <typename F>
bool in_netns(const std::string &name, F f) {
    deputy::UniqueFd own(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
    deputy::UniqueFd other(open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC));
    if (!own || !other || setns(other.get(), CLONE_NEWNET) != 0) return false;
    f();
    return setns(own.get(), CLONE_NEWNET) == 0;
}

TEST(RemoteAgentTest, ACutLinkIsNoticedByBothEnds) {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    HostAndDpu ns;
    if (!ns.error.empty()) GTEST_SKIP() << "cannot build two network namespaces here: " << ns.error;
    KeyFile key;
    AgentConfig cfg(R"("remote_timeout_ms": 2000)");
    const std::string address = "tcp://10.78.0.1:" + free_port();
    AgentProcess agent({"--listen", address, "--key", key.path(), "--config", cfg.path()}, false,
                       {}, "exec ip netns exec " + ns.dpu);
    ASSERT_TRUE(agent.running());
    Env key_env("DEPUTY_KEY", key.path());
    dp_config_t config = agent.config();
    config.agent = address.c_str();
    config.lost_timeout_ms = 1000;
    std::unique_ptr<Client> c;
    ASSERT_TRUE(in_netns(ns.host, [&] { c = std::make_unique<Client>(config); }));
    ASSERT_EQ(c->init, DP_OK);
    expect_memmove(*c, 1000);
    EXPECT_TRUE(eventually([&] { return info(agent)["clients"].size() == 1; }));

    // The cable goes: nothing closes, nothing answers.
    ASSERT_EQ(std::system(("ip -n " + ns.host + " link set " + ns.veth_host + " down").c_str()), 0);
    const auto start = std::chrono::steady_clock::now();
    // The agent drops the silent client within remote_timeout_ms (and a margin).
    EXPECT_TRUE(eventually([&] { return info(agent)["clients"].empty(); }, 8000))
        << info(agent).dump();
    // The client's next operation fails as a lost agent's does, in bounded time.
    alignas(32) dp_completion_t record{};
    std::vector<uint8_t> a(64, 5), b(64, 0);
    dp_status_t call = DP_OK;
    EXPECT_EQ(c->run(descriptor(DP_OP_MEMMOVE, a.data(), b.data(), 64), &record, &call), 0);
    EXPECT_EQ(call, DP_ERR_AGENT_LOST);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(12));
    c.reset();  // before the namespaces go
}

}  // namespace

