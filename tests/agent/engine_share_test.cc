// Few engines shared by many operations: what `deputy info` says each
// engine did, and the rule that keeps small operations piling up on the
// service thread from holding back the engines' refills
// (TeamEngine::run_inline, docs/collectives.md "Engines shared fairly").
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "coll_test_util.h"

namespace {

using deputy::testing::agent_info;
using deputy::testing::AgentConfig;
using deputy::testing::AgentPaused;
using deputy::testing::AgentProcess;
using deputy::testing::Memory;
using deputy::testing::Team;

// The engines' entries of the placement's threads.
std::vector<nlohmann::json> engines_of(const nlohmann::json &info) {
    std::vector<nlohmann::json> out;
    for (const auto &t : info["placement"]["threads"])
        if (t.contains("engine")) out.push_back(t);
    return out;
}

uint64_t engine_descriptors(const AgentProcess &agent) {
    uint64_t n = 0;
    for (const auto &e : engines_of(agent_info(agent))) n += e["descriptors"].get<uint64_t>();
    return n;
}

// Each member's 4-byte integers r * 1000 + i; the sum over members is the
// reference.
void fill_member(uint8_t *buf, size_t count, int rank, int op) {
    auto *v = reinterpret_cast<int32_t *>(buf);
    for (size_t i = 0; i < count; ++i) v[i] = int32_t(rank * 1000 + op * 7 + int(i));
}

TEST(EngineShare, InfoShowsEachEnginesWorkShareAndQueue) {
    AgentProcess agent({"--engines", "2"});
    Team team(agent, 2, "engine-work");
    const size_t count = 1 << 20;  // 4 MiB: the engines run it, in 256 KiB tasks
    std::vector<uint8_t *> src(2), dst(2);
    for (int r = 0; r < 2; ++r) {
        src[r] = team.buffer(r, count * 4);
        dst[r] = team.buffer(r, count * 4);
        fill_member(src[r], count, r, 0);
    }
    for (int i = 0; i < 3; ++i) {
        auto st = team.run([&](int r, dp_request_t **q) {
            return dp_iallreduce(src[r], dst[r], count, DP_INT32, DP_SUM, team[r].team, q);
        });
        for (auto s : st) ASSERT_EQ(s, DP_OK);
    }
    // An engine counts a descriptor just after it published its record, so
    // the last one may still be on its way into the counters when the
    // operation's waiter reads them: a snapshot taken once every one of the
    // 3 x 16 tasks and their bytes are counted (or after 3 s, and then the
    // checks below say what was missing).
    std::vector<nlohmann::json> engines;
    deputy::testing::eventually([&] {
        engines = engines_of(agent_info(agent));
        uint64_t n = 0, b = 0;
        for (const auto &e : engines) {
            n += e["descriptors"].get<uint64_t>();
            b += e["bytes"].get<uint64_t>();
        }
        return n >= 3u * 16u && b >= 3u * 2u * count * 4u;
    });
    ASSERT_EQ(engines.size(), 2u);
    uint64_t work_ns = 0, descriptors = 0, bytes = 0;
    double share = 0;
    for (const auto &e : engines) {
        work_ns += e["work_ns"].get<uint64_t>();
        descriptors += e["descriptors"].get<uint64_t>();
        bytes += e["bytes"].get<uint64_t>();
        const double s = e["work_share"].get<double>();
        EXPECT_GE(s, 0.0);
        EXPECT_LE(s, 1.0);
        share += s;
        EXPECT_EQ(e["queued"], 0) << e.dump();  // every operation finished
    }
    EXPECT_GT(work_ns, 0u);
    EXPECT_NEAR(share, 1.0, 1e-9);
    // Three operations of at least 16 tasks each (4 MiB in 256 KiB pieces,
    // read from both members), every byte of both inputs read each time.
    EXPECT_GE(descriptors, 3u * 16u);
    EXPECT_GE(bytes, 3u * 2u * count * 4u);
}

// Small operations run on the service thread (coll_inline_bytes each), but
// no more than coll_inline_bytes of them between two refills of the
// engines: the rest of a pile goes to the engines, so many small
// operations cannot keep a large one's tasks from being refilled.
TEST(EngineShare, SmallOperationsPilingUpGoToTheEnginesBeyondTheTurnsShare) {
    const AgentConfig config(R"("engines": 2, "coll_inline_bytes": 65536)");
    AgentProcess agent({"--config", config.path()});
    // The agent runs every operation (no member claims one while it is
    // stopped below).
    Team team(agent, 2, "engine-inline", Memory::mapped, 32 << 20, 0);
    const size_t count = 3072;  // 12 KiB: one operation moves less than 64 KiB, two more
    constexpr int kOps = 8;
    std::vector<std::vector<uint8_t *>> src(kOps, std::vector<uint8_t *>(2));
    std::vector<std::vector<uint8_t *>> dst = src;
    for (int op = 0; op < kOps; ++op)
        for (int r = 0; r < 2; ++r) {
            src[op][r] = team.buffer(r, count * 4);
            dst[op][r] = team.buffer(r, count * 4);
            fill_member(src[op][r], count, r, op);
        }
    auto check = [&](int op) {
        for (int r = 0; r < 2; ++r) {
            const auto *got = reinterpret_cast<const int32_t *>(dst[op][r]);
            for (size_t i = 0; i < count; ++i)
                ASSERT_EQ(got[i], int32_t(1000 + 2 * (op * 7 + int(i))))
                    << "operation " << op << " rank " << r << " element " << i;
        }
    };

    // Alone, one runs on the service thread: nothing reaches the engines.
    const uint64_t before = engine_descriptors(agent);
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(src[0][r], dst[0][r], count, DP_INT32, DP_SUM, team[r].team, q);
    });
    for (auto s : st) ASSERT_EQ(s, DP_OK);
    check(0);
    EXPECT_EQ(engine_descriptors(agent), before);

    // Eight posted while the agent is stopped reach it at once: the first
    // runs inline, the next would exceed the turn's 64 KiB and goes to the
    // engines, and so on.
    for (int op = 0; op < kOps; ++op)
        for (int r = 0; r < 2; ++r) std::memset(dst[op][r], 0, count * 4);
    std::vector<std::vector<dp_request_t *>> reqs(kOps, std::vector<dp_request_t *>(2));
    {
        const AgentPaused paused(agent, true);
        for (int op = 0; op < kOps; ++op)
            for (int r = 0; r < 2; ++r)
                ASSERT_EQ(dp_iallreduce(src[op][r], dst[op][r], count, DP_INT32, DP_SUM,
                                        team[r].team, &reqs[op][r]),
                          DP_OK);
    }
    for (auto &op : reqs)
        for (dp_request_t *q : op) {
            EXPECT_EQ(dp_wait(q), DP_OK);
            dp_request_free(q);
        }
    for (int op = 0; op < kOps; ++op) check(op);
    EXPECT_GT(engine_descriptors(agent), before);
}

}  // namespace
