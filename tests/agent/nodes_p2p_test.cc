// Point-to-point between members on different simulated nodes (agents of
// one MPI job on this machine, node_agents.h): bytes exact on both sides of
// the eager limit and in every memory mode, each pair's order with
// wildcards across nodes, truncation, synchronous sends, probes, a flood of
// early messages past the credit, and a peer that dies.
#include <deputy/deputy.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "coll_test_util.h"
#include "node_agents.h"

namespace {

using deputy::testing::eventually;
using deputy::testing::target_shell;
using deputy::testing::why_no_nodes;
using deputy::testing::Memory;
using deputy::testing::NodeAgents;
using deputy::testing::SpanningTeam;

constexpr size_t kEager = 64 << 10;  // the agents' p2p_node_eager_bytes by default

void pattern(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

// Whether a request completed (dp_test's flag).
bool completed(dp_request_t *r) {
    int flag = 0;
    dp_test(r, &flag);
    return flag != 0;
}

class NodesP2pTest : public ::testing::Test {
  protected:
    void start(const std::string &agent_keys = "") {
        if (const std::string why = why_no_nodes(); !why.empty()) GTEST_SKIP() << why;
        agents_ = std::make_unique<NodeAgents>(3, std::vector<std::string>{}, agent_keys);
        ASSERT_TRUE(agents_->ready()) << "3 agents under mpirun did not come up";
    }
    void SetUp() override { start(); }
    std::string key() { return "p" + std::to_string(next_key_++); }
    nlohmann::json info(int node) {
        std::string out;
        const std::string cmd = target_shell(std::string(DEPUTY_BIN) +
                                             " info --format json --socket " +
                                             agents_->socket(node) + " 2>/dev/null");
        if (FILE *f = popen(cmd.c_str(), "r")) {
            char buf[4096];
            size_t n;
            while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
            pclose(f);
        }
        return nlohmann::json::parse(out, nullptr, false);
    }
    // After a failure: nodes 0 and 1's agents still carry a message
    // between a new team's members, bytes exact.
    void expect_survivors_exchange(uint32_t seed) {
        SpanningTeam fresh(*agents_, {0, 1}, key());
        uint8_t *a = fresh.buffer(0, 64), *b = fresh.buffer(1, 64);
        pattern(a, 64, seed);
        dp_request_t *s = nullptr, *q = nullptr;
        ASSERT_EQ(dp_isend(a, 64, 1, 0, fresh.team(0), &s), DP_OK);
        ASSERT_EQ(dp_irecv(b, 64, 0, 0, fresh.team(1), &q), DP_OK);
        EXPECT_EQ(dp_wait(q), DP_OK);
        EXPECT_EQ(dp_wait(s), DP_OK);
        dp_request_free(q);
        dp_request_free(s);
        EXPECT_EQ(std::memcmp(a, b, 64), 0);
    }
    std::unique_ptr<NodeAgents> agents_;
    int next_key_ = 0;
};

// Rank `from` sends to rank `to` (on another node, or the same one), the
// receive posted before or after the send; the bytes, the status and
// nothing past the message are checked.
TEST_F(NodesP2pTest, BytesExactAcrossNodesInEveryMemoryModeAndSize) {
    for (Memory memory : {Memory::mapped, Memory::direct, Memory::staged}) {
        SpanningTeam team(*agents_, {0, 1, 2, 0}, key(), memory);
        for (int r = 0; r < team.size(); ++r) ASSERT_EQ(team.create_status(r), DP_OK);
        const std::vector<std::pair<int, int>> pairs = {{0, 1}, {1, 0}, {2, 3}, {0, 3}};
        for (size_t bytes : {size_t(0), size_t(1), size_t(4096), kEager, kEager + 1,
                             size_t((1 << 20) + 1)}) {
            for (bool recv_first : {true, false}) {
                for (auto [from, to] : pairs) {
                    SCOPED_TRACE(::testing::Message()
                                 << deputy::testing::name(memory) << " " << bytes << " bytes "
                                 << from << "->" << to << (recv_first ? " recv first" : ""));
                    uint8_t *src = team.buffer(from, bytes + 64);
                    uint8_t *dst = team.buffer(to, bytes + 64);
                    pattern(src, bytes, uint32_t(bytes + from));
                    std::memset(dst, 0xee, bytes + 64);
                    dp_request_t *s = nullptr, *q = nullptr;
                    const int tag = int(bytes % 1000) + from;
                    if (recv_first) {
                        ASSERT_EQ(dp_irecv(dst, bytes, from, tag, team.team(to), &q), DP_OK);
                    }
                    ASSERT_EQ(dp_isend(src, bytes, to, tag, team.team(from), &s), DP_OK);
                    if (!recv_first) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(2));
                        ASSERT_EQ(dp_irecv(dst, bytes, from, tag, team.team(to), &q), DP_OK);
                    }
                    ASSERT_EQ(dp_wait(q), DP_OK);
                    ASSERT_EQ(dp_wait(s), DP_OK);
                    dp_msg_status_t st{};
                    ASSERT_EQ(dp_request_status(q, &st), DP_OK);
                    EXPECT_EQ(st.source, from);
                    EXPECT_EQ(st.tag, tag);
                    EXPECT_EQ(st.bytes, bytes);
                    dp_request_free(q);
                    dp_request_free(s);
                    ASSERT_EQ(std::memcmp(dst, src, bytes), 0);
                    for (size_t i = bytes; i < bytes + 64; ++i) ASSERT_EQ(dst[i], 0xee) << i;
                    team.release(from, src);
                    team.release(to, dst);
                }
            }
        }
    }
    const nlohmann::json i = info(0);
    ASSERT_TRUE(i.is_object());
    EXPECT_GT(i["p2p"]["between_nodes"]["eager_sent"].get<uint64_t>(), 0u);
    EXPECT_GT(i["p2p"]["between_nodes"]["ready_sent"].get<uint64_t>(), 0u);
    EXPECT_EQ(i["p2p"]["between_nodes"]["staged_bytes_now"].get<uint64_t>(), 0u);
}

// A rendezvous message between a buffer in a member's pool and one in
// registered ordinary memory, each way and both alike: MPI reads the
// sender's buffer and writes the receiver's itself where its agent maps
// it (a pool), and a copy of the agent's stands in for the other; the
// bytes are exact either way and nothing stays staged.
TEST_F(NodesP2pTest, PoolBuffersGoBetweenNodesWithoutTheAgentsCopies) {
    SpanningTeam team(*agents_, {0, 1}, key());
    ASSERT_EQ(team.create_status(0), DP_OK);
    ASSERT_EQ(team.create_status(1), DP_OK);
    constexpr size_t kBytes = (1 << 20) + 3;  // past the eager limit: asked for
    auto counters = [&](int node) {
        const nlohmann::json i = info(node);
        EXPECT_TRUE(i.is_object());
        const nlohmann::json &b = i["p2p"]["between_nodes"];
        return std::array<uint64_t, 3>{b["sent_from_member"].get<uint64_t>(),
                                       b["received_into_member"].get<uint64_t>(),
                                       b["staged_bytes_now"].get<uint64_t>()};
    };
    const auto before0 = counters(0), before1 = counters(1);
    int round = 0;
    for (bool src_in_pool : {true, false}) {
        for (bool dst_in_pool : {true, false}) {
            SCOPED_TRACE(::testing::Message() << (src_in_pool ? "pool" : "registered") << " -> "
                                              << (dst_in_pool ? "pool" : "registered"));
            auto get = [&](int r, bool pool) {
                if (pool) return static_cast<uint8_t *>(dp_malloc(team.context(r), kBytes + 64));
                void *p = aligned_alloc(64, (kBytes + 64 + 63) / 64 * 64);
                EXPECT_EQ(dp_mem_register(team.context(r), p, kBytes + 64), DP_OK);
                return static_cast<uint8_t *>(p);
            };
            auto put = [&](int r, bool pool, uint8_t *p) {
                if (pool) return dp_free(team.context(r), p);
                EXPECT_EQ(dp_mem_deregister(team.context(r), p), DP_OK);
                free(p);
            };
            uint8_t *src = get(0, src_in_pool), *dst = get(1, dst_in_pool);
            ASSERT_NE(src, nullptr);
            ASSERT_NE(dst, nullptr);
            pattern(src, kBytes, uint32_t(++round));
            std::memset(dst, 0xee, kBytes + 64);
            dp_request_t *s = nullptr, *q = nullptr;
            ASSERT_EQ(dp_isend(src, kBytes, 1, round, team.team(0), &s), DP_OK);
            ASSERT_EQ(dp_irecv(dst, kBytes + 64, 0, round, team.team(1), &q), DP_OK);
            ASSERT_EQ(dp_wait(q), DP_OK);
            ASSERT_EQ(dp_wait(s), DP_OK);
            dp_msg_status_t st{};
            ASSERT_EQ(dp_request_status(q, &st), DP_OK);
            EXPECT_EQ(st.bytes, kBytes);
            dp_request_free(q);
            dp_request_free(s);
            ASSERT_EQ(std::memcmp(dst, src, kBytes), 0);
            for (size_t i = kBytes; i < kBytes + 64; ++i) ASSERT_EQ(dst[i], 0xee) << i;
            put(0, src_in_pool, src);
            put(1, dst_in_pool, dst);
        }
    }
    const auto after0 = counters(0), after1 = counters(1);
    EXPECT_EQ(after0[0] - before0[0], 2u) << "sends read from the sender's pool by MPI";
    EXPECT_EQ(after1[1] - before1[1], 2u) << "receives written into the receiver's pool by MPI";
    EXPECT_EQ(after1[2], 0u);
}

// The node of a message's sender lost while the receive waits for the
// bytes it asked for (the sender's agent stopped, not dead): the receive
// fails within the bound, and when that agent wakes and sends the bytes,
// nothing is written into the receive's buffer, which is the member's own.
TEST_F(NodesP2pTest, AReceiveWhoseBytesNeverCameIsNotWrittenAfterItFailed) {
    SpanningTeam team(*agents_, {0, 2}, key());
    ASSERT_EQ(team.create_status(0), DP_OK);
    ASSERT_EQ(team.create_status(1), DP_OK);
    constexpr size_t kBytes = 1 << 20;
    uint8_t *src = team.buffer(1, kBytes), *dst = team.buffer(0, kBytes);
    pattern(src, kBytes, 5);
    std::memset(dst, 0xee, kBytes);
    dp_request_t *s = nullptr, *q = nullptr;
    ASSERT_EQ(dp_isend(src, kBytes, 0, 5, team.team(1), &s), DP_OK);
    // Its request to send reaches node 0's agent; then node 2's stops.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const pid_t sender_agent = agents_->agent_pid(2);
    ASSERT_GT(sender_agent, 0);
    ASSERT_EQ(kill(sender_agent, SIGSTOP), 0);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(dp_irecv(dst, kBytes, 1, 5, team.team(0), &q), DP_OK);
    EXPECT_EQ(dp_wait(q), DP_ERR_AGENT_LOST);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::seconds(8)) << "bound: node_timeout_ms 2000 + slack";
    ASSERT_EQ(kill(sender_agent, SIGCONT), 0);
    // Awake, it sends the bytes it was asked for (or fails the send,
    // having found node 0 silent meanwhile): either way the send ends.
    const dp_status_t sent = dp_wait(s);
    EXPECT_TRUE(sent == DP_OK || sent == DP_ERR_AGENT_LOST) << dp_status_name(sent);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(dst[i], 0xee) << i;
    dp_request_free(q);
    dp_request_free(s);
    team.release(1, src);
    team.release(0, dst);
}

// Two senders on two nodes, small (eager) and large (asked for) messages
// mixed: the receiver on a third node takes them with DP_ANY_SOURCE and
// DP_ANY_TAG, and each sender's messages come in its sending order.
TEST_F(NodesP2pTest, EachPairsOrderHoldsWithWildcardsAcrossNodes) {
    SpanningTeam team(*agents_, {0, 1, 2}, key());
    for (int r = 0; r < 3; ++r) ASSERT_EQ(team.create_status(r), DP_OK);
    constexpr int kPerSender = 24;
    const size_t sizes[] = {8, kEager + 100, 0, 300000, 16};
    std::vector<dp_request_t *> sends;
    std::vector<uint8_t *> bufs;
    for (int i = 0; i < kPerSender; ++i) {
        for (int from : {0, 2}) {
            const size_t bytes = sizes[size_t(i) % 5];
            uint8_t *b = team.buffer(from, bytes);
            pattern(b, bytes, uint32_t(i * 10 + from));
            if (bytes >= 4) std::memcpy(b, &i, 4);
            dp_request_t *s = nullptr;
            ASSERT_EQ(dp_isend(b, bytes, 1, 100 + i, team.team(from), &s), DP_OK);
            sends.push_back(s);
            bufs.push_back(b);
        }
    }
    uint8_t *dst = team.buffer(1, 300000);
    int next[3] = {0, 0, 0};
    for (int k = 0; k < 2 * kPerSender; ++k) {
        dp_msg_status_t st{};
        ASSERT_EQ(dp_recv(dst, 300000, DP_ANY_SOURCE, DP_ANY_TAG, team.team(1), &st), DP_OK);
        ASSERT_TRUE(st.source == 0 || st.source == 2) << st.source;
        const int i = next[st.source]++;
        EXPECT_EQ(st.tag, 100 + i) << "from " << st.source;
        const size_t bytes = sizes[size_t(i) % 5];
        ASSERT_EQ(st.bytes, bytes);
        std::vector<uint8_t> want(bytes);
        pattern(want.data(), bytes, uint32_t(i * 10 + st.source));
        if (bytes >= 4) std::memcpy(want.data(), &i, 4);
        ASSERT_EQ(std::memcmp(dst, want.data(), bytes), 0) << "message " << i << " of " << st.source;
    }
    for (dp_request_t *s : sends) {
        EXPECT_EQ(dp_wait(s), DP_OK);
        dp_request_free(s);
    }
}

// A receive shorter than the message fails with DP_ERR_TRUNCATED and
// writes nothing; the send completes as under MPI; both sides of the eager
// limit, the receive posted before and after.
TEST_F(NodesP2pTest, TruncationAcrossNodesWritesNothingAndCompletesTheSend) {
    SpanningTeam team(*agents_, {0, 1}, key(), Memory::direct);
    for (int r = 0; r < 2; ++r) ASSERT_EQ(team.create_status(r), DP_OK);
    for (size_t bytes : {size_t(100), kEager * 4}) {
        for (bool recv_first : {true, false}) {
            uint8_t *src = team.buffer(0, bytes);
            uint8_t *dst = team.buffer(1, bytes);
            pattern(src, bytes, 3);
            std::memset(dst, 0x5a, bytes);
            dp_request_t *s = nullptr, *q = nullptr;
            if (recv_first) {
                ASSERT_EQ(dp_irecv(dst, bytes - 1, 0, 9, team.team(1), &q), DP_OK);
            }
            ASSERT_EQ(dp_isend(src, bytes, 1, 9, team.team(0), &s), DP_OK);
            if (!recv_first) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                ASSERT_EQ(dp_irecv(dst, bytes - 1, 0, 9, team.team(1), &q), DP_OK);
            }
            EXPECT_EQ(dp_wait(q), DP_ERR_TRUNCATED) << bytes;
            dp_msg_status_t st{};
            ASSERT_EQ(dp_request_status(q, &st), DP_OK);
            EXPECT_EQ(st.bytes, bytes);
            EXPECT_EQ(st.source, 0);
            EXPECT_EQ(dp_wait(s), DP_OK);
            for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[i], 0x5a) << i;
            dp_request_free(q);
            dp_request_free(s);
        }
    }
}

// A synchronous send to another node completes only once a receive took
// it, however small; a probe there sees the message first.
TEST_F(NodesP2pTest, SynchronousSendWaitsForItsReceiveAndProbesSeeIt) {
    SpanningTeam team(*agents_, {2, 0}, key());
    for (int r = 0; r < 2; ++r) ASSERT_EQ(team.create_status(r), DP_OK);
    uint8_t *src = team.buffer(0, 64), *dst = team.buffer(1, 64);
    pattern(src, 64, 1);
    dp_request_t *s = nullptr;
    ASSERT_EQ(dp_issend(src, 64, 1, 5, team.team(0), &s), DP_OK);
    dp_msg_status_t st{};
    ASSERT_EQ(dp_probe(0, DP_ANY_TAG, team.team(1), &st), DP_OK);
    EXPECT_EQ(st.source, 0);
    EXPECT_EQ(st.tag, 5);
    EXPECT_EQ(st.bytes, 64u);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(completed(s)) << "a synchronous send completed before its receive";
    ASSERT_EQ(dp_recv(dst, 64, 0, 5, team.team(1), &st), DP_OK);
    EXPECT_EQ(dp_wait(s), DP_OK);
    dp_request_free(s);
    EXPECT_EQ(std::memcmp(dst, src, 64), 0);
    // A zero-byte one, too.
    ASSERT_EQ(dp_issend(nullptr, 0, 1, 6, team.team(0), &s), DP_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(completed(s));
    ASSERT_EQ(dp_recv(nullptr, 0, 0, 6, team.team(1), &st), DP_OK);
    EXPECT_EQ(dp_wait(s), DP_OK);
    dp_request_free(s);
}

// 10 000 messages sent (and complete) before any receive: the first go
// eagerly within the sender's credit with the receiving node (made small
// here), the rest as requests to send that wait for their receives,
// which then take all of them in order; nothing is left held.
TEST_F(NodesP2pTest, FloodOfEarlyMessagesPastTheCreditIsReceivedInOrder) {
    agents_.reset();
    start(R"("p2p_node_credit_bytes": 65536)");
    SpanningTeam team(*agents_, {0, 1}, key());
    for (int r = 0; r < 2; ++r) ASSERT_EQ(team.create_status(r), DP_OK);
    constexpr int kMessages = 10000;
    auto *src = reinterpret_cast<int32_t *>(team.buffer(0, sizeof(int32_t) * kMessages));
    for (int i = 0; i < kMessages; ++i) src[i] = i * 3 + 1;
    std::vector<dp_request_t *> sends(kMessages, nullptr);
    // The sender keeps at most DP_P2P_MAX_OUTSTANDING posts open: the
    // receiver runs on a thread of its own.
    std::thread receiver([&] {
        auto *dst = reinterpret_cast<int32_t *>(team.buffer(1, sizeof(int32_t) * kMessages));
        for (int i = 0; i < kMessages; ++i) {
            if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
            dp_msg_status_t st{};
            ASSERT_EQ(dp_recv(dst + i, 4, 0, DP_ANY_TAG, team.team(1), &st), DP_OK) << i;
            ASSERT_EQ(st.tag, i % 1000) << i;
            ASSERT_EQ(dst[i], i * 3 + 1) << i;
        }
    });
    size_t done = 0;
    for (int i = 0; i < kMessages; ++i) {
        ASSERT_EQ(dp_isend(src + i, 4, 1, i % 1000, team.team(0), &sends[size_t(i)]), DP_OK) << i;
        if (i - int(done) >= DP_P2P_MAX_OUTSTANDING - 1) {
            EXPECT_EQ(dp_wait(sends[done]), DP_OK);
            dp_request_free(sends[done++]);
        }
    }
    for (; done < sends.size(); ++done) {
        EXPECT_EQ(dp_wait(sends[done]), DP_OK);
        dp_request_free(sends[done]);
    }
    receiver.join();
    const nlohmann::json i0 = info(0), i1 = info(1);
    ASSERT_TRUE(i0.is_object() && i1.is_object());
    EXPECT_GT(i0["p2p"]["between_nodes"]["eager_sent"].get<uint64_t>(), 0u);
    EXPECT_GT(i0["p2p"]["between_nodes"]["ready_sent"].get<uint64_t>(), 0u)
        << "the credit never ran out";
    EXPECT_EQ(i0["p2p"]["between_nodes"]["sends_waiting"].get<uint64_t>(), 0u);
    EXPECT_EQ(i1["p2p"]["held_now"].get<uint64_t>(), 0u);
}

// A member that dies on one node: the other's receive naming it and its
// send to it fail within the bound; what it sent early before is still
// received; the agents serve new teams.
TEST_F(NodesP2pTest, PeerThatDiesOnAnotherNodeFailsTheOtherSideWithinTheBound) {
    const std::string k = key();
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t child = fork();
    if (child == 0) {  // rank 1 on node 1: sends one early message, then hangs
        deputy::testing::NodeMember m;
        if (deputy::testing::join_on_node(*agents_, 1, k, 1, 2, &m) != DP_OK) _exit(1);
        auto *value = static_cast<int32_t *>(dp_malloc(m.ctx, 64));
        if (!value) _exit(2);
        *value = 4242;
        if (dp_send(value, 4, 0, 1, m.team) != DP_OK) _exit(2);
        [[maybe_unused]] ssize_t n = write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    deputy::testing::NodeMember me;
    ASSERT_EQ(deputy::testing::join_on_node(*agents_, 0, k, 0, 2, &me), DP_OK);
    dp_context_t *ctx = me.ctx;
    dp_team_t *team = me.team;
    char x;
    ASSERT_EQ(read(ready[0], &x, 1), 1);
    close(ready[0]);
    auto *buf = static_cast<uint8_t *>(dp_malloc(ctx, 1 << 20));
    dp_request_t *recv = nullptr, *send = nullptr;
    ASSERT_EQ(dp_irecv(buf, 64, 1, 2, team, &recv), DP_OK);                 // never sent
    ASSERT_EQ(dp_isend(buf + 4096, 1 << 19, 1, 3, team, &send), DP_OK);  // never received
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(completed(recv));
    EXPECT_FALSE(completed(send));
    const auto start = std::chrono::steady_clock::now();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(dp_wait(recv), DP_ERR_AGENT_LOST);
    EXPECT_EQ(dp_wait(send), DP_ERR_AGENT_LOST);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    dp_request_free(recv);
    dp_request_free(send);
    // Its early message, sent before it died, is still there.
    dp_msg_status_t st{};
    ASSERT_EQ(dp_recv(buf, 4, 1, 1, team, &st), DP_OK);
    int32_t got = 0;
    std::memcpy(&got, buf, 4);
    EXPECT_EQ(got, 4242);
    // New posts naming it fail at once.
    EXPECT_EQ(dp_recv(buf, 4, 1, 1, team, &st), DP_ERR_AGENT_LOST);
    dp_free(ctx, buf);
    dp_team_destroy(team);
    dp_finalize(ctx);
    expect_survivors_exchange(9);
}

// The agent of another node killed while a member here waits for a message
// from its member and sends one it never takes: no collective runs, so only
// the agents' heartbeats can tell; both fail within the bound
// (node_timeout_ms = 2 s here), new posts naming that member fail at once,
// and the surviving agents serve new teams.
TEST_F(NodesP2pTest, AgentOfAnotherNodeKilledFailsWaitingMessagesWithinTheBound) {
    auto team = std::make_unique<SpanningTeam>(*agents_, std::vector<int>{0, 2}, key());
    ASSERT_EQ(team->create_status(0), DP_OK);
    ASSERT_EQ(team->create_status(1), DP_OK);
    uint8_t *buf = team->buffer(0, 1 << 20);
    dp_request_t *recv = nullptr, *send = nullptr;
    ASSERT_EQ(dp_irecv(buf, 64, 1, 2, team->team(0), &recv), DP_OK);                 // never sent
    ASSERT_EQ(dp_isend(buf + 4096, 1 << 19, 1, 3, team->team(0), &send), DP_OK);  // never taken
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(completed(recv));
    EXPECT_FALSE(completed(send));
    const pid_t victim = agents_->agent_pid(2);
    ASSERT_GT(victim, 0);
    const auto start = std::chrono::steady_clock::now();
    kill(victim, SIGKILL);
    EXPECT_EQ(dp_wait(recv), DP_ERR_AGENT_LOST);
    EXPECT_EQ(dp_wait(send), DP_ERR_AGENT_LOST);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_GT(took, std::chrono::milliseconds(1000)) << "failed before the node timeout";
    EXPECT_LT(took, std::chrono::seconds(8)) << "bound: node_timeout_ms 2000 + slack";
    dp_request_free(recv);
    dp_request_free(send);
    dp_msg_status_t st{};
    EXPECT_EQ(dp_recv(buf, 4, 1, 1, team->team(0), &st), DP_ERR_AGENT_LOST);
    const nlohmann::json i = info(0);
    ASSERT_TRUE(i.is_object());
    EXPECT_NE(i["internode"].get<std::string>().find("nodes lost 1"), std::string::npos)
        << i["internode"];
    team.reset();
    expect_survivors_exchange(11);
}

}  // namespace
