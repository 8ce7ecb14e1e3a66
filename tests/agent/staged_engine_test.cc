// Staged descriptors run on the engines, not on the agent's service thread:
// while one client sends the largest staged memmoves and reductions it may,
// another client's small mapped memmoves keep completing, and `deputy info`
// counts every staged descriptor among those the device ran.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "raw_client.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::eventually;
using Clock = std::chrono::steady_clock;
namespace control = deputy::channel::control;
using deputy::channel::MsgType;

// A context and its mover, closed at the end of the scope.
struct Attached {
    dp_context_t *ctx = nullptr;
    dp_mover_t *mover = nullptr;
    Attached(dp_config_t config, dp_memory_mode_t mode) {
        config.memory_mode = mode;
        if (dp_init(&config, &ctx) == DP_OK && dp_mover_attach(ctx, &mover) != DP_OK) mover = nullptr;
    }
    ~Attached() {
        if (mover) dp_mover_close(mover);
        if (ctx) dp_finalize(ctx);
    }
    // Submits `d` with `record` and waits; the record's status.
    uint8_t run(dp_desc_t d, dp_completion_t *record) {
        std::memset(record, 0, sizeof *record);
        d.flags |= DP_FLAG_COMPLETION;
        d.completion = reinterpret_cast<uint64_t>(record);
        if (dp_mover_submit(mover, 0, &d) != DP_OK) return 0;
        if (dp_mover_wait(mover, record, DP_WAIT_YIELD, 10'000'000'000) != DP_OK) return 0;
        return record->status;
    }
};

dp_desc_t descriptor(uint8_t opcode, const void *src, void *dst, uint64_t size) {
    dp_desc_t d{};
    d.opcode = opcode, d.size = size;
    d.src = reinterpret_cast<uint64_t>(src), d.dst = reinterpret_cast<uint64_t>(dst);
    return d;
}

uint64_t device_completed(const AgentProcess &agent) {
    std::string text, error;
    if (deputy::channel::request_agent_info(agent.socket(), "", 2'000'000'000, &text, &error) !=
        DP_OK)
        return 0;
    return nlohmann::json::parse(text).at("counters").at("device_completed").get<uint64_t>();
}

TEST(StagedEngineTest, LargeStagedDescriptorsDoNotHoldAnotherClient) {
    AgentProcess agent({"--engines", "2"});
    ASSERT_TRUE(agent.running());
    Attached staged(agent.config(), DP_MEMORY_STAGED);
    Attached mapped(agent.config(), DP_MEMORY_DIRECT);
    ASSERT_TRUE(staged.mover && mapped.mover);
    const uint64_t completed_before = device_completed(agent);

    // The staged client: memmoves and float32 sum-reductions of the agent's
    // largest staged range (max_staged_bytes, 1 MiB by default), each
    // checked, and when each was in flight.
    constexpr size_t kBig = 1 << 20;
    constexpr int kRounds = 24;
    std::vector<std::pair<Clock::time_point, Clock::time_point>> in_flight;
    std::atomic<bool> staged_done{false};
    int staged_ok = 0;
    std::thread staged_thread([&] {
        std::vector<uint8_t> src(kBig), dst(kBig);
        std::vector<float> acc(kBig / 4), inc(kBig / 4);
        alignas(32) dp_completion_t record{};
        for (int round = 0; round < kRounds; ++round) {
            for (size_t i = 0; i < kBig; ++i) src[i] = uint8_t(i * 7 + size_t(round));
            std::fill(dst.begin(), dst.end(), 0);
            dp_desc_t move = descriptor(DP_OP_MEMMOVE, src.data(), dst.data(), kBig);
            for (size_t i = 0; i < acc.size(); ++i)
                acc[i] = float(i % 1000), inc[i] = float(round + 1);
            dp_desc_t reduce = descriptor(DP_OP_REDUCE, inc.data(), acc.data(), kBig);
            reduce.dtype = DP_FLOAT32;
            reduce.redop = DP_SUM;
            reduce.flags = DP_FLAG_ACCUMULATE;
            for (dp_desc_t *d : {&move, &reduce}) {
                const Clock::time_point start = Clock::now();
                const uint8_t status = staged.run(*d, &record);
                in_flight.emplace_back(start, Clock::now());
                EXPECT_EQ(status, DP_COMP_SUCCESS) << "round " << round;
                EXPECT_EQ(record.bytes_completed, kBig);
            }
            EXPECT_EQ(src, dst) << "round " << round;
            size_t wrong = 0;
            for (size_t i = 0; i < acc.size(); ++i) wrong += acc[i] != float(i % 1000 + round + 1);
            EXPECT_EQ(wrong, 0u) << "round " << round;
            staged_ok += 2;
        }
        staged_done.store(true);
    });

    // The other client: 4 KiB mapped memmoves until the staged client is done.
    std::vector<Clock::time_point> completions;
    auto *buf = static_cast<uint8_t *>(dp_malloc(mapped.ctx, 8192));
    auto *record = static_cast<dp_completion_t *>(dp_malloc(mapped.ctx, 32));
    ASSERT_TRUE(buf && record);
    size_t mapped_wrong = 0;
    for (uint32_t n = 0; !staged_done.load(); ++n) {
        for (size_t i = 0; i < 4096; ++i) buf[i] = uint8_t(i + n);
        std::memset(buf + 4096, 0, 4096);
        ASSERT_EQ(mapped.run(descriptor(DP_OP_MEMMOVE, buf, buf + 4096, 4096), record),
                  DP_COMP_SUCCESS);
        completions.push_back(Clock::now());
        mapped_wrong += std::memcmp(buf, buf + 4096, 4096) != 0;
    }
    staged_thread.join();
    EXPECT_EQ(staged_ok, 2 * kRounds);
    EXPECT_EQ(mapped_wrong, 0u);

    // Mapped memmoves completed while a staged descriptor was in flight.
    size_t during = 0;
    for (const Clock::time_point t : completions)
        for (const auto &[start, end] : in_flight)
            if (t > start && t < end) {
                ++during;
                break;
            }
    EXPECT_GT(during, 0u) << completions.size() << " mapped memmoves, none while a staged "
                          << "descriptor was in flight";
    // Every staged descriptor ran on the device's engines, like the mapped ones.
    const uint64_t expected = completed_before + completions.size() + 2 * kRounds;
    EXPECT_TRUE(eventually([&] { return device_completed(agent) == expected; }))
        << "device_completed " << device_completed(agent) << ", expected " << expected;
}

// Requests sent back to back, the staged ones on the engines meanwhile, are
// answered in the order they came.
TEST(StagedEngineTest, AnswersComeInRequestOrder) {
    AgentProcess agent({"--engines", "2"});
    ASSERT_TRUE(agent.running());
    deputy::testing::RawClient raw;
    ASSERT_TRUE(raw.attach(agent.socket().c_str()));
    auto staged_memmove = [](uint64_t user, size_t bytes, uint8_t fill) {
        control::Staged m;
        m.desc.opcode = DP_OP_MEMMOVE;
        m.desc.flags = DP_FLAG_COMPLETION;
        m.desc.user = user;
        m.desc.src = 0x100000;
        m.desc.dst = 0x10000000;
        m.desc.size = bytes;
        m.sources.push_back({m.desc.src, std::vector<uint8_t>(bytes, fill)});
        std::vector<uint8_t> payload;
        control::encode(m, &payload);
        return payload;
    };
    std::vector<uint8_t> deregister;
    control::encode_deregister(0x5000, &deregister);  // nothing registered there: an error answer
    const std::vector<std::pair<MsgType, std::vector<uint8_t>>> requests = {
        {MsgType::kStaged, staged_memmove(1, 1 << 20, 0x11)},
        {MsgType::kStaged, staged_memmove(2, 64, 0x22)},
        {MsgType::kDeregister, deregister},
        {MsgType::kStaged, staged_memmove(3, 1 << 20, 0x33)},
        {MsgType::kStaged, staged_memmove(4, 4096, 0x44)},
    };
    for (const auto &[type, payload] : requests)
        ASSERT_EQ(control::send_message(raw.fd.get(), type, payload, nullptr, 0, 2'000'000'000,
                                        "test"),
                  DP_OK);
    uint64_t next_user = 1;
    std::string error;
    for (const auto &[type, payload] : requests) {
        MsgType got = MsgType::kInvalid;
        std::vector<uint8_t> answer;
        const dp_status_t st =
            control::recv_message(raw.fd.get(), control::kMaxControlMessage, &got, &answer,
                                  nullptr, 0, nullptr, 5'000'000'000, "test");
        ASSERT_EQ(st, DP_OK);
        if (type == MsgType::kDeregister) {
            ASSERT_EQ(got, MsgType::kReply);
            control::Reply reply;
            ASSERT_EQ(control::decode(answer.data(), answer.size(), &reply, &error), DP_OK);
            EXPECT_EQ(reply.status, DP_ERR_INVALID);
            continue;
        }
        ASSERT_EQ(got, MsgType::kStagedResult);
        control::StagedResult result;
        ASSERT_EQ(control::decode(answer.data(), answer.size(), &result, &error), DP_OK) << error;
        ASSERT_EQ(result.status, DP_OK);
        EXPECT_EQ(result.record.user, next_user);
        EXPECT_EQ(result.record.status, DP_COMP_SUCCESS);
        ASSERT_EQ(result.writes.size(), 1u);
        const uint8_t fill = uint8_t(0x11 * next_user);
        EXPECT_EQ(result.writes[0].addr, 0x10000000u);
        EXPECT_EQ(result.writes[0].bytes, std::vector<uint8_t>(result.record.bytes_completed, fill));
        ++next_user;
    }
    EXPECT_EQ(next_user, 5u);
}

}  // namespace
