// Point-to-point messages through a real agent (include/deputy/p2p.h):
// bytes exact in every memory mode and at the sizes around the eager
// bound, MPI's matching rules (order, wildcards, tags), truncation, early
// messages held within the agent's bounds (and back-pressure beyond them),
// probes, a peer that dies, and what a client cannot make the agent do.
#include <deputy/deputy.h>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "coll_test_util.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::Memory;
using deputy::testing::Team;

nlohmann::json p2p_info(const AgentProcess &agent) {
    return deputy::testing::agent_info(agent)["p2p"];
}

void pattern(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

class P2pTest : public ::testing::Test {
  protected:
    AgentProcess agent{{"--engines", "2"}};
    int next_key = 0;
    std::string key() { return "p" + std::to_string(next_key++); }
};

// Every memory mode, sizes around the agent's eager bound (4 KiB) and past
// a task's chunk, the receive posted before the send and after it: the
// receiver's bytes are the sender's, its status names the sender, the tag
// and the length, and nothing past the message is written.
TEST_F(P2pTest, BytesExactInEveryMemoryModeSizeAndOrder) {
    const size_t sizes[] = {0, 1, 4096, 4097, 65537, (1u << 20) + 1};
    for (Memory memory : deputy::testing::kAllMemory) {
        Team team(agent, 2, key(), memory);
        for (size_t n : sizes)
            for (bool recv_first : {true, false}) {
                SCOPED_TRACE(std::string(deputy::testing::name(memory)) + " " + std::to_string(n) +
                             (recv_first ? " receive first" : " send first"));
                uint8_t *src = team.buffer(0, n + 64), *dst = team.buffer(1, n + 64);
                pattern(src, n, uint32_t(n));
                std::memset(dst, 0xEE, n + 64);
                dp_request_t *send = nullptr, *recv = nullptr;
                auto post_recv = [&] {
                    ASSERT_EQ(dp_irecv(dst, n + 64, 0, 7, team[1].team, &recv), DP_OK);
                };
                if (recv_first) post_recv();
                ASSERT_EQ(dp_isend(src, n, 1, 7, team[0].team, &send), DP_OK);
                if (!recv_first) post_recv();
                EXPECT_EQ(dp_wait(send), DP_OK);
                EXPECT_EQ(dp_wait(recv), DP_OK);
                dp_msg_status_t st{};
                ASSERT_EQ(dp_request_status(recv, &st), DP_OK);
                EXPECT_EQ(st.source, 0);
                EXPECT_EQ(st.tag, 7);
                EXPECT_EQ(st.bytes, n);
                EXPECT_EQ(std::memcmp(dst, src, n), 0);
                for (size_t i = n; i < n + 64; ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i;
                dp_request_free(send);
                dp_request_free(recv);
                team.release(0, src);
                team.release(1, dst);
            }
    }
}

// A member sends to itself (MPI allows it), and a team of one works.
TEST_F(P2pTest, SelfSendOnATeamOfOne) {
    Team team(agent, 1, key());
    for (size_t n : {size_t(0), size_t(100), size_t(300000)}) {
        uint8_t *src = team.buffer(0, n), *dst = team.buffer(0, n);
        pattern(src, n, 3);
        dp_request_t *send = nullptr, *recv = nullptr;
        ASSERT_EQ(dp_isend(src, n, 0, 1, team[0].team, &send), DP_OK);
        ASSERT_EQ(dp_irecv(dst, n, DP_ANY_SOURCE, DP_ANY_TAG, team[0].team, &recv), DP_OK);
        EXPECT_EQ(dp_wait(recv), DP_OK);
        EXPECT_EQ(dp_wait(send), DP_OK);
        EXPECT_EQ(std::memcmp(src, dst, n), 0);
        dp_request_free(send);
        dp_request_free(recv);
    }
}

// MPI's order: a receive takes the first message that arrived which it
// accepts; messages of one pair are never overtaken by later ones the same
// receive accepts; a tag that is not wanted waits for its own receive.
TEST_F(P2pTest, MatchingKeepsEachPairsOrderAndHonoursWildcardsAndTags) {
    Team team(agent, 3, key());
    constexpr int kPerSender = 60;
    // Ranks 1 and 2 send kPerSender 8-byte messages each to rank 0, tags
    // cycling 0, 1, 2, all before any receive (held by the agent).
    std::vector<uint64_t *> out(3);
    std::vector<dp_request_t *> sends;
    for (int s = 1; s <= 2; ++s) {
        out[s] = reinterpret_cast<uint64_t *>(team.buffer(s, kPerSender * 8));
        for (int k = 0; k < kPerSender; ++k) {
            out[s][k] = uint64_t(s) << 32 | uint64_t(k);
            dp_request_t *q = nullptr;
            ASSERT_EQ(dp_isend(&out[s][k], 8, 0, k % 3, team[s].team, &q), DP_OK);
            sends.push_back(q);
        }
    }
    for (dp_request_t *q : sends) {
        EXPECT_EQ(dp_wait(q), DP_OK) << "an early 8-byte send completes (held)";
        dp_request_free(q);
    }
    auto *in = reinterpret_cast<uint64_t *>(team.buffer(0, 8));
    auto recv = [&](int source, int tag, dp_msg_status_t *st) {
        ASSERT_EQ(dp_recv(in, 8, source, tag, team[0].team, st), DP_OK);
    };
    dp_msg_status_t st{};
    // Tag 2 from rank 2: its first tag-2 message (k = 2), whatever came before.
    recv(2, 2, &st);
    EXPECT_EQ(*in, (uint64_t(2) << 32) | 2);
    EXPECT_EQ(st.source, 2);
    EXPECT_EQ(st.tag, 2);
    // Any tag from rank 1: its messages in the order they were sent.
    for (int k = 0; k < 5; ++k) {
        recv(1, DP_ANY_TAG, &st);
        EXPECT_EQ(*in, (uint64_t(1) << 32) | uint64_t(k));
        EXPECT_EQ(st.tag, k % 3);
    }
    // Everything else, by any source and any tag: each pair's order holds
    // (rank 2's k = 2 is gone already).
    std::vector<int> next = {0, 5, 0};
    for (int i = 0; i < 2 * kPerSender - 6; ++i) {
        recv(DP_ANY_SOURCE, DP_ANY_TAG, &st);
        const int s = int(*in >> 32), k = int(*in & 0xffffffff);
        ASSERT_EQ(st.source, s);
        if (s == 2 && next[2] == 2) ++next[2];
        ASSERT_EQ(k, next[s]) << "rank " << s << "'s messages overtook one another";
        EXPECT_EQ(st.tag, k % 3);
        ++next[s];
    }
    EXPECT_EQ(next[1], kPerSender);
    EXPECT_EQ(next[2], kPerSender);
    int flag = 1;
    EXPECT_EQ(dp_iprobe(DP_ANY_SOURCE, DP_ANY_TAG, team[0].team, &flag, nullptr), DP_OK);
    EXPECT_EQ(flag, 0) << "a message left over";
}

// Receives posted first, for many tags in one order, sends in the reverse
// order: each receive gets the message of its tag.
TEST_F(P2pTest, ManyTagsPostedFirstMatchTheirOwnMessages) {
    Team team(agent, 2, key());
    constexpr int kTags = 500;
    auto *in = reinterpret_cast<int32_t *>(team.buffer(1, kTags * 4));
    auto *out = reinterpret_cast<int32_t *>(team.buffer(0, kTags * 4));
    std::vector<dp_request_t *> recvs(kTags), sends(kTags);
    for (int t = 0; t < kTags; ++t)
        ASSERT_EQ(dp_irecv(&in[t], 4, 0, 1000 + t, team[1].team, &recvs[t]), DP_OK);
    for (int t = kTags - 1; t >= 0; --t) {
        out[t] = t * 3 + 1;
        ASSERT_EQ(dp_isend(&out[t], 4, 1, 1000 + t, team[0].team, &sends[t]), DP_OK);
    }
    for (int t = 0; t < kTags; ++t) {
        EXPECT_EQ(dp_wait(recvs[t]), DP_OK);
        EXPECT_EQ(dp_wait(sends[t]), DP_OK);
        EXPECT_EQ(in[t], t * 3 + 1) << "tag " << 1000 + t;
        dp_request_free(recvs[t]);
        dp_request_free(sends[t]);
    }
}

// A receive shorter than its message fails with DP_ERR_TRUNCATED, writes
// nothing into its buffer, and tells the message's length; the send
// completes as under MPI. Early (held) and waiting messages alike.
TEST_F(P2pTest, ShortReceiveIsTruncatedAndWritesNothing) {
    Team team(agent, 2, key());
    for (size_t n : {size_t(100), size_t(200000)}) {
        SCOPED_TRACE(n);
        uint8_t *src = team.buffer(0, n), *dst = team.buffer(1, n);
        pattern(src, n, 9);
        std::memset(dst, 0xAB, n);
        dp_request_t *send = nullptr;
        ASSERT_EQ(dp_isend(src, n, 1, 5, team[0].team, &send), DP_OK);
        dp_msg_status_t st{};
        EXPECT_EQ(dp_recv(dst, n / 2, 0, 5, team[1].team, &st), DP_ERR_TRUNCATED);
        EXPECT_EQ(st.bytes, n);
        EXPECT_EQ(st.source, 0);
        EXPECT_EQ(st.tag, 5);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], 0xAB) << "byte " << i << " written";
        EXPECT_EQ(dp_wait(send), DP_OK);
        dp_request_free(send);
    }
    // The team goes on.
    uint8_t *a = team.buffer(0, 8), *b = team.buffer(1, 8);
    std::memcpy(a, "deputy!", 8);
    dp_request_t *send = nullptr;
    ASSERT_EQ(dp_isend(a, 8, 1, 0, team[0].team, &send), DP_OK);
    EXPECT_EQ(dp_recv(b, 8, 0, 0, team[1].team, nullptr), DP_OK);
    EXPECT_EQ(std::memcmp(a, b, 8), 0);
    EXPECT_EQ(dp_wait(send), DP_OK);
    dp_request_free(send);
}

// 10 000 messages sent (blocking) before any receive: each send completes
// as the agent holds its bytes, the agent says it holds them all, and the
// receives then take them in order; nothing is held afterwards.
TEST_F(P2pTest, TenThousandEarlyMessagesAreHeldAndReceivedInOrder) {
    Team team(agent, 2, key());
    constexpr int kMessages = 10000;
    auto *out = reinterpret_cast<uint32_t *>(team.buffer(0, 4));
    for (int k = 0; k < kMessages; ++k) {
        *out = uint32_t(k) * 2654435761u;
        ASSERT_EQ(dp_send(out, 4, 1, 3, team[0].team), DP_OK) << k;
    }
    nlohmann::json info = p2p_info(agent);
    EXPECT_EQ(info["held_now"], kMessages);
    EXPECT_EQ(info["held_bytes_now"], 4 * kMessages);
    auto *in = reinterpret_cast<uint32_t *>(team.buffer(1, 4));
    for (int k = 0; k < kMessages; ++k) {
        ASSERT_EQ(dp_recv(in, 4, 0, 3, team[1].team, nullptr), DP_OK);
        ASSERT_EQ(*in, uint32_t(k) * 2654435761u) << "message " << k;
    }
    info = p2p_info(agent);
    EXPECT_EQ(info["held_now"], 0);
    EXPECT_EQ(info["held_bytes_now"], 0);
    EXPECT_EQ(info["moving"], 0);
}

// Beyond the agent's bound on held messages a send waits for its receive
// (back-pressure): none is lost, none completes early past the bound.
TEST(P2pBounds, SendsBeyondTheHeldBoundWaitForTheirReceives) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string config = dir + "/agent.json";
    std::ofstream(config) << R"({"agent": {"p2p_held_messages": 100, "p2p_held_bytes": 1048576}})";
    AgentProcess agent({"--config", config});
    Team team(agent, 2, "bound");
    constexpr int kMessages = 150;
    auto *out = reinterpret_cast<uint32_t *>(team.buffer(0, 4 * kMessages));
    std::vector<dp_request_t *> sends(kMessages);
    for (int k = 0; k < kMessages; ++k) {
        out[k] = uint32_t(k + 1);
        ASSERT_EQ(dp_isend(&out[k], 4, 1, 0, team[0].team, &sends[k]), DP_OK);
    }
    // The first 100 complete (held); the rest stay pending.
    for (int k = 0; k < 100; ++k) EXPECT_EQ(dp_wait(sends[k]), DP_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int k = 100; k < kMessages; ++k) {
        int done = 1;
        EXPECT_EQ(dp_test(sends[k], &done), DP_OK);
        EXPECT_EQ(done, 0) << "send " << k << " completed past the bound";
    }
    EXPECT_EQ(p2p_info(agent)["held_now"], 100);
    auto *in = reinterpret_cast<uint32_t *>(team.buffer(1, 4));
    for (int k = 0; k < kMessages; ++k) {
        ASSERT_EQ(dp_recv(in, 4, 0, 0, team[1].team, nullptr), DP_OK);
        EXPECT_EQ(*in, uint32_t(k + 1));
    }
    for (dp_request_t *q : sends) {
        EXPECT_EQ(dp_wait(q), DP_OK);
        dp_request_free(q);
    }
    EXPECT_EQ(p2p_info(agent)["held_now"], 0);
    std::filesystem::remove_all(dir);
}

TEST_F(P2pTest, ProbeSeesAnArrivedMessageAndTheNextReceiveTakesIt) {
    Team team(agent, 2, key());
    int flag = 1;
    dp_msg_status_t st{};
    ASSERT_EQ(dp_iprobe(0, DP_ANY_TAG, team[1].team, &flag, &st), DP_OK);
    EXPECT_EQ(flag, 0);
    uint8_t *src = team.buffer(0, 300000), *dst = team.buffer(1, 300000);
    pattern(src, 300000, 4);
    dp_request_t *send = nullptr;
    ASSERT_EQ(dp_isend(src, 300000, 1, 42, team[0].team, &send), DP_OK);
    ASSERT_EQ(dp_probe(DP_ANY_SOURCE, 42, team[1].team, &st), DP_OK);
    EXPECT_EQ(st.source, 0);
    EXPECT_EQ(st.tag, 42);
    EXPECT_EQ(st.bytes, 300000u);
    ASSERT_EQ(dp_iprobe(0, 41, team[1].team, &flag, nullptr), DP_OK);
    EXPECT_EQ(flag, 0) << "another tag";
    ASSERT_EQ(dp_recv(dst, st.bytes, st.source, st.tag, team[1].team, nullptr), DP_OK);
    EXPECT_EQ(std::memcmp(src, dst, 300000), 0);
    EXPECT_EQ(dp_wait(send), DP_OK);
    dp_request_free(send);
}

// A synchronous send of an early message is not held: it completes only
// once a receive took it, while a standard one of the same size completes
// at once.
TEST_F(P2pTest, SynchronousSendCompletesOnlyOnceReceived) {
    Team team(agent, 2, key());
    auto *out = reinterpret_cast<uint64_t *>(team.buffer(0, 16));
    auto *in = reinterpret_cast<uint64_t *>(team.buffer(1, 16));
    out[0] = 11;
    out[1] = 22;
    dp_request_t *standard = nullptr, *sync = nullptr;
    ASSERT_EQ(dp_isend(&out[0], 8, 1, 1, team[0].team, &standard), DP_OK);
    ASSERT_EQ(dp_issend(&out[1], 8, 1, 2, team[0].team, &sync), DP_OK);
    EXPECT_EQ(dp_wait(standard), DP_OK) << "an early standard send is held and completes";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int done = 1;
    EXPECT_EQ(dp_test(sync, &done), DP_OK);
    EXPECT_EQ(done, 0) << "the synchronous send completed before any receive";
    EXPECT_EQ(dp_recv(&in[1], 8, 0, 2, team[1].team, nullptr), DP_OK);
    EXPECT_EQ(dp_wait(sync), DP_OK);
    EXPECT_EQ(dp_recv(&in[0], 8, 0, 1, team[1].team, nullptr), DP_OK);
    EXPECT_EQ(in[0], 11u);
    EXPECT_EQ(in[1], 22u);
    dp_request_free(standard);
    dp_request_free(sync);
    // The blocking form returns once the receive, posted later, took it.
    dp_status_t sent = DP_ERR_INTERNAL;
    std::thread sender([&] { sent = dp_ssend(&out[0], 8, 1, 3, team[0].team); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(dp_recv(&in[0], 8, 0, 3, team[1].team, nullptr), DP_OK);
    sender.join();
    EXPECT_EQ(sent, DP_OK);
    EXPECT_EQ(in[0], 11u);
}

// The arguments the library refuses itself, with the error naming them.
TEST_F(P2pTest, BadArgumentsAreRefusedAtThePost) {
    Team team(agent, 2, key());
    uint8_t *b = team.buffer(0, 64);
    dp_request_t *q = nullptr;
    dp_team_t *t = team[0].team;
    EXPECT_EQ(dp_isend(b, 8, 2, 0, t, &q), DP_ERR_INVALID);             // no rank 2
    EXPECT_EQ(dp_isend(b, 8, DP_ANY_SOURCE, 0, t, &q), DP_ERR_INVALID);  // a send names one
    EXPECT_EQ(dp_isend(b, 8, 1, DP_ANY_TAG, t, &q), DP_ERR_INVALID);
    EXPECT_EQ(dp_isend(b, 8, 1, -5, t, &q), DP_ERR_INVALID);
    EXPECT_EQ(dp_irecv(b, 8, -2, 0, t, &q), DP_ERR_INVALID);
    EXPECT_EQ(dp_irecv(b, 8, 0, -2, t, &q), DP_ERR_INVALID);
    EXPECT_EQ(dp_isend(nullptr, 8, 1, 0, t, &q), DP_ERR_INVALID);
    EXPECT_EQ(dp_isend(b, 8, 1, 0, nullptr, &q), DP_ERR_INVALID);
    EXPECT_EQ(dp_isend(b, 8, 1, 0, t, nullptr), DP_ERR_INVALID);
    EXPECT_EQ(dp_isend(b, size_t(1) << 40, 1, 0, t, &q), DP_ERR_TOO_LARGE);
    EXPECT_EQ(q, nullptr);
    // A zero-byte message may have no buffer.
    dp_request_t *s = nullptr, *r = nullptr;
    ASSERT_EQ(dp_isend(nullptr, 0, 1, DP_TAG_MAX, t, &s), DP_OK);
    ASSERT_EQ(dp_irecv(nullptr, 0, 0, DP_TAG_MAX, team[1].team, &r), DP_OK);
    EXPECT_EQ(dp_wait(s), DP_OK);
    EXPECT_EQ(dp_wait(r), DP_OK);
    dp_msg_status_t st{};
    EXPECT_EQ(dp_request_status(s, &st), DP_ERR_INVALID) << "a send has no message status";
    dp_request_free(s);
    dp_request_free(r);
}

// DP_P2P_MAX_OUTSTANDING requests per member and team, then
// DP_ERR_TOO_LARGE; freeing one makes room.
TEST_F(P2pTest, OutstandingRequestsAreBoundedPerMember) {
    Team team(agent, 2, key());
    uint8_t *b = team.buffer(1, 8);
    std::vector<dp_request_t *> recvs(DP_P2P_MAX_OUTSTANDING);
    for (auto &q : recvs) ASSERT_EQ(dp_irecv(b, 8, 0, 9, team[1].team, &q), DP_OK);
    dp_request_t *more = nullptr;
    EXPECT_EQ(dp_irecv(b, 8, 0, 9, team[1].team, &more), DP_ERR_TOO_LARGE);
    // Collectives have their own slots.
    uint8_t *c0 = team.buffer(0, 8), *c1 = team.buffer(1, 8);
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(r ? c1 : c0, r ? c1 : c0, 1, DP_INT64, DP_SUM, team[r].team, q);
    });
    EXPECT_EQ(st[0], DP_OK);
    // Senders complete them all.
    uint8_t *out = team.buffer(0, 8);
    for (int k = 0; k < DP_P2P_MAX_OUTSTANDING; ++k) ASSERT_EQ(dp_send(out, 8, 1, 9, team[0].team), DP_OK);
    for (auto &q : recvs) {
        EXPECT_EQ(dp_wait(q), DP_OK);
        dp_request_free(q);
    }
    ASSERT_EQ(dp_irecv(b, 8, 0, 9, team[1].team, &more), DP_OK);
    ASSERT_EQ(dp_send(out, 8, 1, 9, team[0].team), DP_OK);
    EXPECT_EQ(dp_wait(more), DP_OK);
    dp_request_free(more);
}

// Direct memory the member never registered: the agent refuses to touch it
// (DP_ERR_DENIED on that side) and the team goes on. (Past 64 KiB: a
// smaller message goes through the member's pool, client/p2p.h.)
TEST_F(P2pTest, UnregisteredOrdinaryMemoryIsDenied) {
    Team team(agent, 2, key(), Memory::direct);
    std::vector<uint8_t> wild(100000, 1);
    uint8_t *ok = team.buffer(1, 4096);
    dp_request_t *send = nullptr;
    ASSERT_EQ(dp_isend(wild.data(), wild.size(), 1, 0, team[0].team, &send), DP_OK);
    EXPECT_EQ(dp_wait(send), DP_ERR_DENIED);
    dp_request_free(send);
    dp_request_t *recv = nullptr;
    ASSERT_EQ(dp_irecv(wild.data(), wild.size(), 0, 0, team[1].team, &recv), DP_OK);
    EXPECT_EQ(dp_wait(recv), DP_ERR_DENIED);
    dp_request_free(recv);
    uint8_t *src = team.buffer(0, 4096);
    pattern(src, 4096, 1);
    ASSERT_EQ(dp_isend(src, 4096, 1, 0, team[0].team, &send), DP_OK);
    EXPECT_EQ(dp_recv(ok, 4096, 0, 0, team[1].team, nullptr), DP_OK);
    EXPECT_EQ(dp_wait(send), DP_OK);
    dp_request_free(send);
    EXPECT_EQ(std::memcmp(src, ok, 4096), 0);
}

// A member that dies: the survivor's receive from it and its send waiting
// for the dead member's receive both fail with DP_ERR_AGENT_LOST within the
// bound, a message the dead member sent early is still delivered, and the
// agent holds nothing of the team afterwards.
TEST_F(P2pTest, APeerThatDiesFailsWhatWaitsForItAndDeliversWhatItSent) {
    const int fds_before = agent.settled_fds();
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    dp_config_t config = agent.config();
    config.pool_bytes = 8 << 20;
    const std::string k = key();
    pid_t child = fork();
    if (child == 0) {
        dp_context_t *ctx = nullptr;
        dp_team_t *team = nullptr;
        if (dp_init(&config, &ctx) != DP_OK || dp_team_create(ctx, k.c_str(), 1, 2, &team) != DP_OK)
            _exit(2);
        auto *m = static_cast<uint64_t *>(dp_malloc(ctx, 8));
        *m = 0x5eed;
        if (dp_send(m, 8, 0, 11, team) != DP_OK) _exit(3);  // held by the agent
        char c = 1;
        [[maybe_unused]] ssize_t n = write(ready[1], &c, 1);
        pause();
        _exit(0);
    }
    // Killed and reaped however the test ends.
    struct Reap {
        pid_t pid;
        ~Reap() {
            if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
        }
    } reap{child};
    dp_context_t *ctx = nullptr;
    dp_team_t *team = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    ASSERT_EQ(dp_team_create(ctx, k.c_str(), 0, 2, &team), DP_OK);
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    auto *buf = static_cast<uint8_t *>(dp_malloc(ctx, 1 << 20));
    dp_request_t *recv = nullptr, *send = nullptr;
    ASSERT_EQ(dp_irecv(buf, 8, 1, 12, team, &recv), DP_OK);              // never sent
    ASSERT_EQ(dp_isend(buf, 1 << 20, 1, 13, team, &send), DP_OK);        // never received
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    reap.pid = 0;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(dp_wait(recv), DP_ERR_AGENT_LOST);
    EXPECT_EQ(dp_wait(send), DP_ERR_AGENT_LOST);
    EXPECT_LE(std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count(),
              2000);
    dp_request_free(recv);
    dp_request_free(send);
    uint64_t got = 0;
    auto *in = static_cast<uint64_t *>(dp_malloc(ctx, 8));
    EXPECT_EQ(dp_recv(in, 8, 1, 11, team, nullptr), DP_OK) << "the early message is still there";
    got = *in;
    EXPECT_EQ(got, 0x5eedu);
    EXPECT_EQ(dp_recv(in, 8, 1, 11, team, nullptr), DP_ERR_AGENT_LOST) << "and nothing more";
    EXPECT_EQ(dp_isend(in, 8, 1, 11, team, &send), DP_OK);
    EXPECT_EQ(dp_wait(send), DP_ERR_AGENT_LOST);
    dp_request_free(send);
    EXPECT_EQ(dp_team_destroy(team), DP_OK);
    dp_finalize(ctx);
    close(ready[0]);
    close(ready[1]);
    for (int i = 0; i < 300 && agent.count_fds() != fds_before; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(agent.count_fds(), fds_before);
    const nlohmann::json info = p2p_info(agent);
    EXPECT_EQ(info["held_now"], 0);
    EXPECT_EQ(info["moving"], 0);
}

}  // namespace
