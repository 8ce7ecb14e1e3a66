// Point-to-point messages a waiting receiver matches and copies itself
// (client/p2p.h, the cards of channel/team_board.h): bytes and status as
// the agent's, MPI's order whoever matches, what stays the agent's
// (truncation, memory the receiver cannot see), a member that holds the
// team's lock (its team waits, no other, and the agent does not spin), and
// a receiver that dies while it copies (its sender fails, never hangs).
//
// The agent is stopped (SIGSTOP) where a test needs the receiver to be the
// one that matches; stopped and continued in turns where both must.
#include <deputy/deputy.h>

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "channel/team_board.h"
#include "client/handles.h"
#include "client/team.h"
#include "coll_test_util.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::Memory;
using deputy::testing::Team;
namespace ch = deputy::channel;

nlohmann::json p2p_info(const AgentProcess &agent) {
    return deputy::testing::agent_info(agent)["p2p"];
}

// The counters once the agent caught up with every post (it takes what
// came while it was stopped in its next turns).
nlohmann::json settled_info(const AgentProcess &agent, uint64_t copied) {
    nlohmann::json p;
    for (int i = 0; i < 500; ++i) {
        p = p2p_info(agent);
        if (p["copied_by_receivers"].get<uint64_t>() >= copied && p["deferred_now"] == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return p;
}

// The agent stopped for the scope: SIGSTOP is delivered asynchronously,
// so the constructor returns once /proc says the agent is stopped.
char state_of(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}
struct Stopped {
    pid_t pid;
    // With a board: stopped while not holding that team's point-to-point
    // lock (a stop can land while the agent drops posts its receivers
    // copied, under the lock; a receiver would then wait for ever).
    explicit Stopped(pid_t p, const ch::TeamBoard *board = nullptr) : pid(p) {
        for (;;) {
            kill(pid, SIGSTOP);
            for (int i = 0; i < 10000 && state_of(pid) != 'T'; ++i)
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            if (!board || board->header().p2p_lock.load() != ch::kP2pLockAgent) return;
            kill(pid, SIGCONT);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    ~Stopped() { kill(pid, SIGCONT); }
};

const ch::TeamBoard &board_of(dp_team_t *team) { return team->impl->ranks()->board(); }

// A message's bytes: its sender, its number and its length in every byte.
uint8_t byte_of(uint32_t from, uint32_t index, size_t i) {
    return uint8_t(from * 41 + index * 7 + i * 13 + (i >> 9));
}

// With the agent stopped, the receiver's wait matches and copies the
// message itself: every size from 0 bytes to past a MiB, pool and shared
// heap, receive posted before and after the send; up to 64 KiB also in
// registered ordinary memory and in memory nobody registered (both go
// through the members' pools); the sender completes on its card. Once the
// agent runs again it finds the cards taken and drops the posts: it moved
// nothing and holds nothing.
TEST(P2pReceiversCopy, AWaitingReceiverCopiesTheMessageItselfWhileTheAgentIsStopped) {
    AgentProcess agent;
    const size_t sizes[] = {0, 1, 4096, 65536, 65537, (1u << 20) + 1};
    uint64_t messages = 0;
    for (Memory memory : {Memory::mapped, Memory::heap, Memory::direct}) {
        Team team(agent, 2, std::string("copy-") + deputy::testing::name(memory), memory);
        ASSERT_TRUE(board_of(team[1].team).cards());
        for (size_t n : sizes)
            for (bool recv_first : {true, false}) {
                if (memory == Memory::direct && n + 64 > 65536) continue;  // (its receive)
                SCOPED_TRACE(std::string(deputy::testing::name(memory)) + " " + std::to_string(n) +
                             (recv_first ? " receive first" : " send first"));
                uint8_t *src = team.buffer(0, n + 64), *dst = team.buffer(1, n + 64);
                for (size_t i = 0; i < n; ++i) src[i] = byte_of(0, uint32_t(n), i);
                std::memset(dst, 0xEE, n + 64);
                dp_request_t *send = nullptr, *recv = nullptr;
                {
                    Stopped stopped(agent.pid(), &board_of(team[1].team));
                    if (recv_first) {
                        ASSERT_EQ(dp_irecv(dst, n + 64, 0, 9, team[1].team, &recv), DP_OK);
                    }
                    ASSERT_EQ(dp_isend(src, n, 1, 9, team[0].team, &send), DP_OK);
                    if (!recv_first) {
                        ASSERT_EQ(dp_irecv(dst, n + 64, 0, 9, team[1].team, &recv), DP_OK);
                    }
                    int done = 0;
                    ASSERT_EQ(dp_test(send, &done), DP_OK);
                    EXPECT_EQ(done, 0) << "the send completed before its receiver looked";
                    ASSERT_EQ(dp_wait(recv), DP_OK);
                    ASSERT_EQ(dp_wait(send), DP_OK);
                }
                ++messages;
                dp_msg_status_t st{};
                ASSERT_EQ(dp_request_status(recv, &st), DP_OK);
                EXPECT_EQ(st.source, 0);
                EXPECT_EQ(st.tag, 9);
                EXPECT_EQ(st.bytes, n);
                EXPECT_EQ(std::memcmp(dst, src, n), 0);
                for (size_t i = n; i < n + 64; ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i;
                dp_request_free(send);
                dp_request_free(recv);
                team.release(0, src);
                team.release(1, dst);
            }
        // Before the team goes: the agent drops the posts of a member that
        // left without counting them.
        settled_info(agent, messages);
    }
    {
        SCOPED_TRACE("memory nobody registered, up to 64 KiB");
        Team team(agent, 2, "copy-unregistered", Memory::mapped);
        std::vector<uint8_t> src(65536), dst(65536 + 64, 0xEE);
        for (size_t i = 0; i < src.size(); ++i) src[i] = byte_of(0, 77, i);
        dp_request_t *send = nullptr, *recv = nullptr;
        {
            Stopped stopped(agent.pid(), &board_of(team[1].team));
            ASSERT_EQ(dp_irecv(dst.data(), src.size(), 0, 1, team[1].team, &recv), DP_OK);
            ASSERT_EQ(dp_isend(src.data(), src.size(), 1, 1, team[0].team, &send), DP_OK);
            ASSERT_EQ(dp_wait(recv), DP_OK);
            ASSERT_EQ(dp_wait(send), DP_OK);
        }
        ++messages;
        EXPECT_EQ(std::memcmp(dst.data(), src.data(), src.size()), 0);
        for (size_t i = src.size(); i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i;
        dp_request_free(send);
        dp_request_free(recv);
        settled_info(agent, messages);
    }
    const nlohmann::json p = settled_info(agent, messages);
    EXPECT_EQ(p["copied_by_receivers"], messages);
    EXPECT_EQ(p["messages"], 0) << "the agent moved a message its receiver had copied";
    EXPECT_EQ(p["failed"], 0);
    EXPECT_EQ(p["held_now"], 0);
    EXPECT_EQ(p["moving"], 0);
}

// MPI's order whoever matches: two senders stream numbered messages of
// 8 KiB-72 KiB in bursts past a pair's cards (some go without one) to a
// receiver whose receives take any source, then one source and one tag at
// a time, while the agent is stopped and continued every few
// milliseconds, so that the agent and the receiver both match, and each
// finds queue entries the other took. Each sender's messages arrive in
// its order, each once, bytes exact; the agent's count and the
// receivers' add up.
TEST(P2pReceiversCopy, OrderHoldsWhetherTheAgentOrTheReceiverMatches) {
    AgentProcess agent;
    Team team(agent, 3, "order", Memory::heap);
    team.wait_together();
    constexpr uint32_t kPerSender = 240, kBurst = 40;
    constexpr size_t kMax = 72 << 10;
    auto length = [](uint32_t from, uint32_t k) { return size_t(8 << 10) + (k * 4099 + from * 977) % (64 << 10); };
    std::atomic<bool> running{true};
    std::thread toggler([&] {
        while (running) {
            kill(agent.pid(), SIGSTOP);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            kill(agent.pid(), SIGCONT);
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
        }
    });
    // Phase 1: any source, any tag. Phase 2: tag k % 3 from one source at a
    // time (the receives name them in another order than the sends go).
    // (Team::buffer is for one thread.)
    std::vector<std::vector<uint8_t *>> send_bufs(3, std::vector<uint8_t *>(kBurst));
    std::vector<uint8_t *> dst(kBurst);
    for (uint32_t from = 1; from <= 2; ++from)
        for (auto &b : send_bufs[from]) b = team.buffer(int(from), kMax);
    for (auto &d : dst) d = team.buffer(0, kMax);
    for (int phase = 1; phase <= 2; ++phase) {
        SCOPED_TRACE("phase " + std::to_string(phase));
        std::vector<std::thread> senders;
        for (uint32_t from = 1; from <= 2; ++from)
            senders.emplace_back([&, from] {
                const std::vector<uint8_t *> &bufs = send_bufs[from];
                for (uint32_t k0 = 0; k0 < kPerSender; k0 += kBurst) {
                    std::vector<dp_request_t *> reqs;
                    for (uint32_t k = k0; k < k0 + kBurst; ++k) {
                        uint8_t *b = bufs[k - k0];
                        const size_t n = length(from, k);
                        for (size_t i = 0; i < n; ++i) b[i] = byte_of(from, k, i);
                        dp_request_t *r = nullptr;
                        ASSERT_EQ(dp_isend(b, n, 0, int(k % 3), team[int(from)].team, &r), DP_OK);
                        reqs.push_back(r);
                    }
                    for (dp_request_t *r : reqs) {
                        ASSERT_EQ(dp_wait(r), DP_OK);
                        dp_request_free(r);
                    }
                }
            });
        uint32_t next[3] = {0, 0, 0};           // phase 1: each sender's next number
        uint32_t next_tag[3][3] = {};           // phase 2: per sender and tag, counted in k
        auto check = [&](uint8_t *d, const dp_msg_status_t &st, int want_source, int want_tag) {
            ASSERT_TRUE(st.source == 1 || st.source == 2) << st.source;
            if (want_source >= 0) {
                ASSERT_EQ(st.source, want_source);
            }
            if (want_tag >= 0) {
                ASSERT_EQ(st.tag, want_tag);
            }
            const uint32_t from = uint32_t(st.source);
            uint32_t k;
            if (phase == 1) {
                k = next[from]++;
            } else {
                const uint32_t t = uint32_t(st.tag);
                k = next_tag[from][t]++ * 3 + t;
            }
            ASSERT_EQ(st.tag, int(k % 3)) << "from " << from << " message " << k;
            ASSERT_EQ(st.bytes, length(from, k)) << "from " << from << " message " << k;
            for (size_t i = 0; i < st.bytes; ++i)
                ASSERT_EQ(d[i], byte_of(from, k, i))
                    << "from " << from << ": message " << k << " expected, byte " << i;
        };
        const uint32_t total = 2 * kPerSender;
        for (uint32_t got = 0; got < total;) {
            std::vector<dp_request_t *> reqs;
            std::vector<std::pair<int, int>> wanted;
            for (uint32_t i = 0; i < kBurst && got + i < total; ++i) {
                int source = DP_ANY_SOURCE, tag = DP_ANY_TAG;
                if (phase == 2) {
                    // Round robin over (source, tag) pairs, in receive order.
                    const uint32_t j = got + i;
                    source = 1 + int((j / 3) % 2);
                    tag = int(j % 3);
                }
                dp_request_t *r = nullptr;
                ASSERT_EQ(dp_irecv(dst[i], kMax, source, tag, team[0].team, &r), DP_OK);
                reqs.push_back(r);
                wanted.emplace_back(source, tag);
            }
            for (size_t i = 0; i < reqs.size(); ++i) {
                ASSERT_EQ(dp_wait(reqs[i]), DP_OK) << "receive " << got + i;
                dp_msg_status_t st{};
                ASSERT_EQ(dp_request_status(reqs[i], &st), DP_OK);
                check(dst[i], st, wanted[i].first, wanted[i].second);
                dp_request_free(reqs[i]);
            }
            got += uint32_t(reqs.size());
        }
        for (auto &s : senders) s.join();
    }
    running = false;
    toggler.join();
    kill(agent.pid(), SIGCONT);
    const nlohmann::json p = settled_info(agent, 1);
    const uint64_t copied = p["copied_by_receivers"], moved = p["messages"];
    EXPECT_EQ(copied + moved, 4 * kPerSender) << p.dump();
    EXPECT_GT(copied, 0u) << "no receiver matched a message itself: " << p.dump();
    EXPECT_GT(moved, 0u) << "the agent matched nothing: " << p.dump();
    EXPECT_EQ(p["failed"], 0);
    EXPECT_EQ(p["deferred_now"], 0);
}

// What the receiver leaves to the agent, even while it waits with the agent
// stopped: a message longer than its receive (the agent reports the
// truncation and writes nothing), a send from registered ordinary memory
// (the receiver's views do not reach it), a receive into registered memory,
// and a message the agent holds (4 KiB, sent before its receive).
TEST(P2pReceiversCopy, WhatTheReceiverCannotTakeStaysTheAgents) {
    AgentProcess agent;
    Team team(agent, 2, "left", Memory::mapped);
    // (Called with the agent stopped.)
    auto not_done_while_stopped = [&](dp_request_t *recv) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
        int done = 0;
        while (std::chrono::steady_clock::now() < until) {
            EXPECT_EQ(dp_test_in_wait(recv, &done), DP_OK);
            ASSERT_EQ(done, 0) << "the receiver took it";
        }
    };
    {
        SCOPED_TRACE("truncated");
        uint8_t *src = team.buffer(0, 100000), *dst = team.buffer(1, 50000);
        std::memset(src, 1, 100000);
        std::memset(dst, 0xEE, 50000);
        dp_request_t *send = nullptr, *recv = nullptr;
        {
            Stopped stopped(agent.pid());
            ASSERT_EQ(dp_isend(src, 100000, 1, 0, team[0].team, &send), DP_OK);
            ASSERT_EQ(dp_irecv(dst, 50000, 0, 0, team[1].team, &recv), DP_OK);
            not_done_while_stopped(recv);
        }
        EXPECT_EQ(dp_wait(recv), DP_ERR_TRUNCATED);
        dp_msg_status_t st{};
        ASSERT_EQ(dp_request_status(recv, &st), DP_OK);
        EXPECT_EQ(st.bytes, 100000u);
        for (int i = 0; i < 50000; ++i) ASSERT_EQ(dst[i], 0xEE) << i;
        EXPECT_EQ(dp_wait(send), DP_OK);
        dp_request_free(send);
        dp_request_free(recv);
    }
    auto through_agent = [&](const char *what, uint8_t *src, uint8_t *dst, size_t n) {
        SCOPED_TRACE(what);
        for (size_t i = 0; i < n; ++i) src[i] = byte_of(0, 5, i);
        std::memset(dst, 0xEE, n);
        dp_request_t *send = nullptr, *recv = nullptr;
        {
            Stopped stopped(agent.pid());
            ASSERT_EQ(dp_isend(src, n, 1, 3, team[0].team, &send), DP_OK);
            ASSERT_EQ(dp_irecv(dst, n, 0, 3, team[1].team, &recv), DP_OK);
            not_done_while_stopped(recv);
        }
        ASSERT_EQ(dp_wait(recv), DP_OK);
        ASSERT_EQ(dp_wait(send), DP_OK);
        EXPECT_EQ(std::memcmp(src, dst, n), 0);
        dp_request_free(send);
        dp_request_free(recv);
    };
    const size_t n = 200000;
    std::vector<uint8_t> plain_src(n), plain_dst(n);
    ASSERT_EQ(dp_mem_register(team[0].ctx, plain_src.data(), n), DP_OK);
    ASSERT_EQ(dp_mem_register(team[1].ctx, plain_dst.data(), n), DP_OK);
    uint8_t *pool_src = team.buffer(0, n), *pool_dst = team.buffer(1, n);
    through_agent("from registered memory", plain_src.data(), pool_dst, n);
    through_agent("into registered memory", pool_src, plain_dst.data(), n);
    EXPECT_EQ(dp_mem_deregister(team[0].ctx, plain_src.data()), DP_OK);
    EXPECT_EQ(dp_mem_deregister(team[1].ctx, plain_dst.data()), DP_OK);
    {
        SCOPED_TRACE("held by the agent");
        uint8_t *src = team.buffer(0, 4096), *dst = team.buffer(1, 4096);
        for (size_t i = 0; i < 4096; ++i) src[i] = byte_of(0, 6, i);
        dp_request_t *send = nullptr, *recv = nullptr;
        ASSERT_EQ(dp_isend(src, 4096, 1, 4, team[0].team, &send), DP_OK);
        ASSERT_EQ(dp_wait(send), DP_OK) << "an early 4 KiB message is held";
        {
            Stopped stopped(agent.pid());
            ASSERT_EQ(dp_irecv(dst, 4096, 0, 4, team[1].team, &recv), DP_OK);
            not_done_while_stopped(recv);
        }
        ASSERT_EQ(dp_wait(recv), DP_OK);
        EXPECT_EQ(std::memcmp(src, dst, 4096), 0);
        dp_request_free(send);
        dp_request_free(recv);
    }
    const nlohmann::json p = settled_info(agent, 0);
    EXPECT_EQ(p["copied_by_receivers"], 0) << p.dump();
    EXPECT_EQ(p["messages"], 3);
    EXPECT_EQ(p["failed"], 1) << "the truncated receive";
}

// A member that takes its team's point-to-point lock and never gives it
// back (as a hostile or stopped one would) holds up its own team's
// messages only: the agent defers that team's posts without waiting or
// spinning, another team's messages flow, and once the lock is free the
// deferred posts are taken in order.
TEST(P2pReceiversCopy, AMemberHoldingTheLockHoldsUpOnlyItsOwnTeam) {
    AgentProcess agent;
    Team held(agent, 2, "held"), other(agent, 2, "other");
    const ch::TeamBoard &board = board_of(held[1].team);
    ASSERT_TRUE(board.try_lock_p2p(1 + 1)) << "rank 1 takes the lock";
    const size_t n = 100000;
    uint8_t *src = held.buffer(0, n), *dst = held.buffer(1, n);
    for (size_t i = 0; i < n; ++i) src[i] = byte_of(0, 1, i);
    dp_request_t *send = nullptr, *recv = nullptr;
    ASSERT_EQ(dp_isend(src, n, 1, 0, held[0].team, &send), DP_OK);
    ASSERT_EQ(dp_irecv(dst, n, 0, 0, held[1].team, &recv), DP_OK);
    const double cpu_before = agent.cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    // The other team: a message each way, several times.
    uint8_t *a = other.buffer(0, n), *b = other.buffer(1, n);
    for (int k = 0; k < 20; ++k) {
        for (size_t i = 0; i < n; ++i) a[i] = byte_of(0, uint32_t(k), i);
        dp_request_t *s = nullptr, *r = nullptr;
        ASSERT_EQ(dp_isend(a, n, 1, k, other[0].team, &s), DP_OK);
        ASSERT_EQ(dp_irecv(b, n, 0, k, other[1].team, &r), DP_OK);
        ASSERT_EQ(dp_wait(r), DP_OK);
        ASSERT_EQ(dp_wait(s), DP_OK);
        ASSERT_EQ(std::memcmp(a, b, n), 0);
        dp_request_free(s);
        dp_request_free(r);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1000) -
                                (std::chrono::steady_clock::now() - start));
    const double cpu = agent.cpu_seconds() - cpu_before;
    EXPECT_LT(cpu, 0.2) << "the agent spun over a held lock";
    int done = 0;
    ASSERT_EQ(dp_test(send, &done), DP_OK);
    EXPECT_EQ(done, 0);
    nlohmann::json p = p2p_info(agent);
    EXPECT_GE(p["deferred_now"].get<uint64_t>(), 2u) << p.dump();
    board.unlock_p2p(1 + 1);
    ASSERT_EQ(dp_wait(recv), DP_OK);
    ASSERT_EQ(dp_wait(send), DP_OK);
    EXPECT_EQ(std::memcmp(src, dst, n), 0);
    dp_request_free(send);
    dp_request_free(recv);
    p = settled_info(agent, 0);
    EXPECT_EQ(p["deferred_now"], 0);
    EXPECT_GE(p["deferred_total"].get<uint64_t>(), 2u);
    EXPECT_EQ(p["failed"], 0);
}

// A receiver that dies while it copies (its card says taken, it is gone):
// its sender's wait fails with DP_ERR_AGENT_LOST, never hangs.
TEST(P2pReceiversCopy, AReceiverThatDiesWhileCopyingFailsItsSender) {
    AgentProcess agent;
    auto team = std::make_unique<Team>(agent, 2, "dies");
    const ch::TeamBoard &board = board_of((*team)[0].team);
    const size_t n = 100000;
    uint8_t *src = team->buffer(0, n);
    dp_request_t *send = nullptr;
    {
        Stopped stopped(agent.pid(), &board);
        ASSERT_EQ(dp_isend(src, n, 1, 0, (*team)[0].team, &send), DP_OK);
        // As rank 1 would have, just before it died in its copy.
        ASSERT_TRUE(board.try_lock_p2p(1 + 1));
        std::atomic<uint64_t> &word = board.send_card(0, 1, 1).state;
        uint64_t posted = ch::card_word(1, ch::kCardPosted);
        ASSERT_TRUE(word.compare_exchange_strong(posted, ch::card_word(1, ch::kCardTaken)));
    }
    // Rank 1 goes (it leaves and its context closes).
    EXPECT_EQ(dp_team_destroy((*team)[1].team), DP_OK);
    dp_finalize((*team)[1].ctx);
    (*team)[1].team = nullptr;
    (*team)[1].ctx = nullptr;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(dp_wait(send), DP_ERR_AGENT_LOST);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    dp_request_free(send);
    EXPECT_EQ(board.header().p2p_lock.load(), 0u) << "the dead member's lock was freed";
}

}  // namespace
