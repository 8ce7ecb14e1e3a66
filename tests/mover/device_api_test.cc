// The mover device's API around the operations: DRAIN, every wait mode
// (timeouts, a blocked waiter woken by the engine), full and missing queues,
// dp_mover_open's configuration checks, exact counters and the name tables.
#include <deputy/mover.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mover/config.h"
#include "mover/device.h"
#include "mover/test_util.h"
#include "mover/wait.h"

namespace deputy::test {
namespace {

TEST(MoverDrain, CompletesAfterEveryEarlierDescriptor) {
    // Two engines on one queue: while one engine takes the DRAIN the other may
    // still be copying; the drain must wait for it.
    MoverPtr mover = open_mover(2, 1, DP_WQ_DEDICATED, 256);
    ASSERT_NE(mover, nullptr);
    constexpr size_t kCopies = 48, kBytes = 256 * 1024;
    Guarded src(kBytes);
    src.fill_random(11);
    std::vector<std::unique_ptr<Guarded>> dsts;
    for (size_t i = 0; i < kCopies; ++i) dsts.push_back(std::make_unique<Guarded>(kBytes));
    std::vector<dp_completion_t> records(kCopies);
    for (int round = 0; round < 10; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        std::memset(records.data(), 0, records.size() * sizeof(dp_completion_t));
        for (size_t i = 0; i < kCopies; ++i) {
            dsts[i]->fill_byte(uint8_t(round));
            dp_desc_t d =
                make_desc(DP_OP_MEMMOVE, dsts[i]->address(), src.address(), kBytes, 0, 0, i);
            d.flags = DP_FLAG_COMPLETION;
            d.completion = addr(&records[i]);
            ASSERT_EQ(submit_retry(mover.get(), 0, d), DP_OK);
        }
        dp_completion_t drain;
        std::memset(&drain, 0, sizeof(drain));
        dp_desc_t d = make_desc(DP_OP_DRAIN, 0, 0, 0, 0, 0, 777);
        d.flags = DP_FLAG_COMPLETION;
        d.completion = addr(&drain);
        ASSERT_EQ(submit_retry(mover.get(), 0, d), DP_OK);
        ASSERT_EQ(dp_mover_wait(mover.get(), &drain, DP_WAIT_PAUSE, kWaitBoundNs), DP_OK);
        EXPECT_RECORD(read_record(drain), DP_COMP_SUCCESS, 0, 0, 0, 777);
        // No waiting from here on: everything must already be there.
        for (size_t i = 0; i < kCopies; ++i) {
            Record r = read_record(records[i]);
            ASSERT_EQ(status_text(r.status), status_text(DP_COMP_SUCCESS)) << "copy " << i;
            EXPECT_EQ(r.user, i);
            ASSERT_EQ(first_diff(dsts[i]->data(), src.data(), kBytes), kBytes) << "copy " << i;
        }
    }
}

TEST(MoverDrain, InvalidDrainFields) {
    MoverPtr mover = open_mover();
    Guarded dst(64);
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_DRAIN, dst.address(), 0, 0, 0, 0, 1)),
                  DP_COMP_INVALID_FIELD, 0, 0, 0, 1);
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_DRAIN, 0, 0, 8, 0, 0, 2)), DP_COMP_INVALID_FIELD,
                  0, 0, 0, 2);
    dp_desc_t fenced = make_desc(DP_OP_DRAIN, 0, 0, 0, 0, 0, 3);
    fenced.flags = DP_FLAG_FENCE;
    EXPECT_RECORD(run(mover.get(), fenced), DP_COMP_INVALID_FLAGS, 0, 0, 0, 3);
}

const dp_wait_mode_t kWaitModes[] = {DP_WAIT_SPIN, DP_WAIT_PAUSE, DP_WAIT_YIELD, DP_WAIT_BLOCK,
                                     DP_WAIT_DEFAULT};

TEST(MoverWait, EveryModeReturnsWithCorrectData) {
    for (dp_wait_mode_t device_default : {DP_WAIT_SPIN, DP_WAIT_BLOCK}) {
        dp_mover_config_t config = DP_MOVER_CONFIG_INITIALIZER;
        config.wait_mode = device_default;
        MoverPtr mover = open_mover(config);
        ASSERT_NE(mover, nullptr);
        const size_t n = 1 << 20;
        Guarded src(n, 1), dst(n, 2);
        src.fill_random(5);
        for (dp_wait_mode_t mode : kWaitModes) {
            for (int rep = 0; rep < 20; ++rep) {
                SCOPED_TRACE("mode " + std::to_string(mode) + " rep " + std::to_string(rep));
                dst.fill_byte(uint8_t(rep));
                dp_completion_t comp;
                std::memset(&comp, 0, sizeof(comp));
                dp_desc_t d = make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), n, 0, 0, rep);
                d.flags = DP_FLAG_COMPLETION;
                d.completion = addr(&comp);
                ASSERT_EQ(dp_mover_submit(mover.get(), 0, &d), DP_OK);
                ASSERT_EQ(dp_mover_wait(mover.get(), &comp, mode, kWaitBoundNs), DP_OK);
                EXPECT_RECORD(read_record(comp), DP_COMP_SUCCESS, 0, n, 0, rep);
                ASSERT_EQ(first_diff(dst.data(), src.data(), n), n);
                // Waiting on a complete record returns at once, even with no time left.
                EXPECT_EQ(dp_mover_wait(mover.get(), &comp, mode, 0), DP_OK);
            }
        }
    }
}

TEST(MoverWait, TimeoutOnARecordThatNeverCompletes) {
    MoverPtr mover = open_mover();
    for (dp_wait_mode_t mode : kWaitModes) {
        for (int64_t timeout_ns : {int64_t(0), int64_t(1'000'000), int64_t(30'000'000)}) {
            SCOPED_TRACE("mode " + std::to_string(mode) + " timeout " + std::to_string(timeout_ns));
            dp_completion_t comp;
            std::memset(&comp, 0, sizeof(comp));
            auto start = std::chrono::steady_clock::now();
            EXPECT_EQ(dp_mover_wait(mover.get(), &comp, mode, timeout_ns), DP_ERR_TIMEOUT);
            auto elapsed = std::chrono::steady_clock::now() - start;
            // Never early (the wait measures from its own start, after ours) and
            // never hanging.
            EXPECT_GE(elapsed, std::chrono::nanoseconds(timeout_ns));
            EXPECT_LT(elapsed, std::chrono::seconds(5));
            EXPECT_EQ(comp.status, DP_COMP_PENDING);
        }
    }
}

TEST(MoverWait, InvalidArguments) {
    MoverPtr mover = open_mover();
    dp_completion_t comp;
    std::memset(&comp, 0, sizeof(comp));
    EXPECT_EQ(dp_mover_wait(mover.get(), nullptr, DP_WAIT_SPIN, 0), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_wait(nullptr, &comp, DP_WAIT_SPIN, 0), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_wait(mover.get(), &comp, dp_wait_mode_t(4), 0), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_wait(mover.get(), &comp, dp_wait_mode_t(100), 0), DP_ERR_INVALID);
}

// A device whose engines start when the test says so.
std::unique_ptr<mover::Device> make_device(uint32_t wq_size, dp_wq_mode_t mode,
                                           uint32_t engines = 1) {
    mover::DeviceConfig config;
    mover::WqConfig wq;
    wq.name = "wq0.0";
    wq.mode = mode;
    wq.size = wq_size;
    config.wqs.push_back(wq);
    config.groups.push_back(mover::GroupConfig{"group0.0", {0}, engines});
    config.start_engines = false;
    std::unique_ptr<mover::Device> device;
    std::string error;
    EXPECT_EQ(mover::Device::create(config, &device, &error), DP_OK) << error;
    return device;
}

TEST(MoverWait, BlockModeWakesWhenTheEngineCompletes) {
    auto device = make_device(8, DP_WQ_DEDICATED);
    ASSERT_NE(device, nullptr);
    const size_t n = 1 << 16;
    Guarded src(n), dst(n);
    src.fill_random(3);
    dp_completion_t comp;
    std::memset(&comp, 0, sizeof(comp));
    dp_desc_t d = make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), n, 0, 0, 99);
    d.flags = DP_FLAG_COMPLETION;
    d.completion = addr(&comp);
    ASSERT_EQ(device->submit(0, d), DP_OK);

    std::atomic<dp_status_t> waited{DP_INPROGRESS};
    std::thread waiter(
        [&] { waited = mover::wait_completion(&comp, DP_WAIT_BLOCK, kWaitBoundNs); });
    // The waiter sets the record's waiter byte right before it sleeps: once it
    // shows, the engine's completion has to wake a sleeper.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (__atomic_load_n(&comp.waiter, __ATOMIC_ACQUIRE) == 0 &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    ASSERT_NE(__atomic_load_n(&comp.waiter, __ATOMIC_ACQUIRE), 0)
        << "waiter never announced itself";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it reach the futex
    EXPECT_EQ(waited.load(), DP_INPROGRESS);
    device->start_engines();
    waiter.join();
    EXPECT_EQ(waited.load(), DP_OK);
    EXPECT_RECORD(read_record(comp), DP_COMP_SUCCESS, 0, n, 0, 99);
    EXPECT_EQ(first_diff(dst.data(), src.data(), n), n);
    // Publishing replaces the whole first word: the waiter byte is cleared.
    EXPECT_EQ(comp.waiter, 0);
}

TEST(MoverQueue, FullQueueRefusesExactlyOneMore) {
    for (dp_wq_mode_t mode : {DP_WQ_DEDICATED, DP_WQ_SHARED}) {
        for (uint32_t size : {1u, 8u, 128u}) {
            SCOPED_TRACE(std::string(mode == DP_WQ_SHARED ? "shared" : "dedicated") + " size " +
                         std::to_string(size));
            auto device = make_device(size, mode);
            ASSERT_NE(device, nullptr);
            std::vector<dp_completion_t> records(size + 1);
            std::memset(records.data(), 0, records.size() * sizeof(dp_completion_t));
            auto noop = [&](size_t i) {
                dp_desc_t d = make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, i);
                d.flags = DP_FLAG_COMPLETION;
                d.completion = addr(&records[i]);
                return d;
            };
            for (uint32_t i = 0; i < size; ++i) ASSERT_EQ(device->submit(0, noop(i)), DP_OK) << i;
            EXPECT_EQ(device->submit(0, noop(size)), DP_ERR_RETRY);
            EXPECT_EQ(device->submit(0, noop(size)), DP_ERR_RETRY);
            dp_mover_stats_t stats;
            device->stats(&stats);
            EXPECT_EQ(stats.submitted, size);
            EXPECT_EQ(stats.retries, 2u);
            EXPECT_EQ(stats.completed, 0u);
            // Nothing ran while the engines were stopped.
            for (uint32_t i = 0; i < size; ++i) EXPECT_EQ(records[i].status, DP_COMP_PENDING);

            device->start_engines();
            for (uint32_t i = 0; i < size; ++i) {
                ASSERT_EQ(mover::wait_completion(&records[i], DP_WAIT_YIELD, kWaitBoundNs), DP_OK);
                EXPECT_RECORD(read_record(records[i]), DP_COMP_SUCCESS, 0, 0, 0, i);
            }
            // The refused descriptor goes in once there is room.
            ASSERT_EQ(device->submit(0, noop(size)), DP_OK);
            ASSERT_EQ(mover::wait_completion(&records[size], DP_WAIT_YIELD, kWaitBoundNs), DP_OK);
            EXPECT_RECORD(read_record(records[size]), DP_COMP_SUCCESS, 0, 0, 0, size);
            device->stats(&stats);
            EXPECT_EQ(stats.submitted, size + 1);
            EXPECT_EQ(stats.completed, size + 1);
            EXPECT_EQ(stats.retries, 2u);
        }
    }
}

TEST(MoverQueue, SubmitToMissingQueue) {
    MoverPtr mover = open_mover(1, 2);
    ASSERT_NE(mover, nullptr);
    dp_desc_t d = make_desc(DP_OP_NOOP, 0, 0, 0);
    EXPECT_EQ(dp_mover_submit(mover.get(), 2, &d), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_submit(mover.get(), UINT32_MAX, &d), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_submit(mover.get(), 0, nullptr), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_submit(nullptr, 0, &d), DP_ERR_INVALID);
    // Both existing queues work.
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, 5), 0), DP_COMP_SUCCESS, 0,
                  0, 0, 5);
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, 6), 1), DP_COMP_SUCCESS, 0,
                  0, 0, 6);
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    ASSERT_EQ(dp_mover_get_stats(mover.get(), &stats), DP_OK);
    EXPECT_EQ(stats.submitted, 2u);  // the refused ones never counted
}

TEST(MoverOpen, BadConfigs) {
    struct Row {
        const char *name;
        void (*change)(dp_mover_config_t *);
    };
    const Row rows[] = {
        {"size 0", [](dp_mover_config_t *c) { c->size = 0; }},
        {"size too small", [](dp_mover_config_t *c) { c->size = sizeof(*c) - 8; }},
        {"0 engines", [](dp_mover_config_t *c) { c->num_engines = 0; }},
        {"65 engines", [](dp_mover_config_t *c) { c->num_engines = DP_MOVER_MAX_ENGINES + 1; }},
        {"0 wqs", [](dp_mover_config_t *c) { c->num_wqs = 0; }},
        {"65 wqs", [](dp_mover_config_t *c) { c->num_wqs = DP_MOVER_MAX_WQS + 1; }},
        {"wq_size 0", [](dp_mover_config_t *c) { c->wq_size = 0; }},
        {"wq_size 100", [](dp_mover_config_t *c) { c->wq_size = 100; }},
        {"wq_size 3", [](dp_mover_config_t *c) { c->wq_size = 3; }},
        {"wq_size 131072", [](dp_mover_config_t *c) { c->wq_size = 131072; }},
        {"wq_mode 2", [](dp_mover_config_t *c) { c->wq_mode = 2; }},
        {"wq_mode -1", [](dp_mover_config_t *c) { c->wq_mode = UINT32_MAX; }},
        {"max_batch_size 0", [](dp_mover_config_t *c) { c->max_batch_size = 0; }},
        {"max_batch_size 4097", [](dp_mover_config_t *c) { c->max_batch_size = 4097; }},
        {"max_transfer_size 0", [](dp_mover_config_t *c) { c->max_transfer_size = 0; }},
        {"wait_mode 4", [](dp_mover_config_t *c) { c->wait_mode = 4; }},
        {"wait_mode default", [](dp_mover_config_t *c) { c->wait_mode = DP_WAIT_DEFAULT; }},
        {"cpu_list x", [](dp_mover_config_t *c) { c->cpu_list = "0,x"; }},
        {"cpu_list empty", [](dp_mover_config_t *c) { c->cpu_list = ""; }},
    };
    for (const Row &row : rows) {
        SCOPED_TRACE(row.name);
        dp_mover_config_t config = DP_MOVER_CONFIG_INITIALIZER;
        row.change(&config);
        dp_mover_t *mover = reinterpret_cast<dp_mover_t *>(0x1);
        EXPECT_EQ(dp_mover_open(&config, &mover), DP_ERR_INVALID);
        EXPECT_EQ(mover, nullptr);
    }
    dp_mover_config_t config = DP_MOVER_CONFIG_INITIALIZER;
    EXPECT_EQ(dp_mover_open(&config, nullptr), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_close(nullptr), DP_ERR_INVALID);
}

TEST(MoverOpen, GoodConfigs) {
    // NULL = defaults; the limits themselves are accepted.
    dp_mover_t *mover = nullptr;
    ASSERT_EQ(dp_mover_open(nullptr, &mover), DP_OK);
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    ASSERT_EQ(dp_mover_get_stats(mover, &stats), DP_OK);
    EXPECT_EQ(stats.num_engines, 1u);
    EXPECT_EQ(stats.num_wqs, 1u);
    EXPECT_EQ(dp_mover_close(mover), DP_OK);

    dp_mover_config_t config = DP_MOVER_CONFIG_INITIALIZER;
    config.num_engines = 3;
    config.num_wqs = DP_MOVER_MAX_WQS;
    config.wq_size = 1;
    config.wq_mode = DP_WQ_SHARED;
    config.max_batch_size = 4096;
    config.cpu_list = "0";
    MoverPtr big = open_mover(config);
    ASSERT_NE(big, nullptr);
    ASSERT_EQ(dp_mover_get_stats(big.get(), &stats), DP_OK);
    EXPECT_EQ(stats.num_engines, 3u);
    EXPECT_EQ(stats.num_wqs, uint32_t(DP_MOVER_MAX_WQS));
    EXPECT_RECORD(run(big.get(), make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, 1), DP_MOVER_MAX_WQS - 1),
                  DP_COMP_SUCCESS, 0, 0, 0, 1);
}

TEST(MoverStats, ExactAfterAKnownWorkload) {
    MoverPtr mover = open_mover();
    ASSERT_NE(mover, nullptr);
    Guarded a(1000), b(1000), c(1000);
    a.fill_random(1);
    // 3 good copies of 1000 bytes, 1 failed fill, 1 compare that differs
    // (a false predicate is not a failure).
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(run(mover.get(), make_desc(DP_OP_MEMMOVE, b.address(), a.address(), 1000)).status,
                  DP_COMP_SUCCESS);
    ASSERT_EQ(run(mover.get(), make_desc(DP_OP_FILL, c.address(), 0, 0, 1)).status,
              DP_COMP_INVALID_SIZE);
    c.fill_byte(9);
    ASSERT_EQ(run(mover.get(), make_desc(DP_OP_COMPARE, 0, a.address(), 500, c.address())).status,
              DP_COMP_FALSE_PREDICATE);
    // A batch of 3: a 100-byte copy, a 7-byte fill, a bad member.
    dp_desc_t members[3] = {make_desc(DP_OP_MEMMOVE, b.address(), a.address(), 100),
                            make_desc(DP_OP_FILL, c.address(), 0, 7, 5),
                            make_desc(DP_OP_MEMMOVE, b.address(), a.address(), 0)};
    ASSERT_EQ(run(mover.get(), make_desc(DP_OP_BATCH, 0, addr(members), 3)).status,
              DP_COMP_BATCH_FAILED);

    // An engine counts a descriptor just after publishing its record
    // (mover.h): the counts settle a moment after the last wait returns
    // (on an Arm host, or emulated, a moment long enough to see).
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
        ASSERT_EQ(dp_mover_get_stats(mover.get(), &stats), DP_OK);
        // (bytes is the last counter an engine bumps)
        const bool settled = stats.completed >= 9 && stats.bytes >= 3607;
        if (settled || std::chrono::steady_clock::now() > give_up) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(stats.size, sizeof(stats));
    EXPECT_EQ(stats.submitted, 6u);
    EXPECT_EQ(stats.completed, 5u + 1u + 3u);     // 5 single + the batch + its 3 members
    EXPECT_EQ(stats.failed, 1u + 1u + 1u);        // the fill, the batch, its bad member
    EXPECT_EQ(stats.bytes, 3000u + 500u + 107u);  // failures count no bytes
    EXPECT_EQ(stats.retries, 0u);
    EXPECT_EQ(stats.num_engines, 1u);
    EXPECT_EQ(stats.num_wqs, 1u);

    // An older caller's smaller struct gets only what it has room for.
    struct {
        dp_mover_stats_t stats;
        uint64_t canary;
    } small;
    small.canary = 0x1234;
    std::memset(&small.stats, 0xff, sizeof(small.stats));
    small.stats.size = offsetof(dp_mover_stats_t, completed);
    ASSERT_EQ(dp_mover_get_stats(mover.get(), &small.stats), DP_OK);
    EXPECT_EQ(small.stats.size, offsetof(dp_mover_stats_t, completed));
    EXPECT_EQ(small.stats.submitted, 6u);
    EXPECT_EQ(small.stats.completed, UINT64_MAX);  // beyond its size: untouched
    EXPECT_EQ(small.canary, 0x1234u);
    small.stats.size = 0;
    EXPECT_EQ(dp_mover_get_stats(mover.get(), &small.stats), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_get_stats(mover.get(), nullptr), DP_ERR_INVALID);
}

TEST(MoverNames, EveryEnumHasAName) {
    EXPECT_STREQ(dp_opcode_name(DP_OP_MEMMOVE), "memmove");
    EXPECT_STREQ(dp_opcode_name(DP_OP_REDUCE), "reduce");
    EXPECT_STREQ(dp_opcode_name(dp_opcode_t(0x0b)), "unknown");
    EXPECT_STREQ(dp_comp_status_name(DP_COMP_SUCCESS), "success");
    EXPECT_STREQ(dp_comp_status_name(DP_COMP_INVALID_BATCH), "invalid_batch");
    EXPECT_STREQ(dp_comp_status_name(DP_COMP_STATUS_COUNT), "unknown");
    for (int s = 0; s < DP_COMP_STATUS_COUNT; ++s)
        EXPECT_STRNE(dp_comp_status_name(dp_comp_status_t(s)), "unknown") << s;
    EXPECT_STREQ(dp_dtype_name(DP_FLOAT32), "float32");
    EXPECT_STREQ(dp_dtype_name(DP_BFLOAT16), "bfloat16");
    EXPECT_STREQ(dp_dtype_name(DP_DTYPE_COUNT), "unknown");
    EXPECT_STREQ(dp_op_name(DP_SUM), "sum");
    EXPECT_STREQ(dp_op_name(DP_OP_COUNT), "unknown");
    EXPECT_STREQ(dp_dtype_name(DP_FLOAT64_INT32), "float64_int32");
    EXPECT_STREQ(dp_op_name(DP_MAXLOC), "maxloc");
    // The pairs as C lays out the struct MPI's pair types describe.
    struct FI { float v; int32_t i; };
    struct DI { double v; int32_t i; };
    struct LI { int64_t v; int32_t i; };
    struct II { int32_t v; int32_t i; };
    struct SI { int16_t v; int32_t i; };
    struct FF { float v; float i; };
    struct DD { double v; double i; };
    const size_t sizes[DP_DTYPE_COUNT] = {1,          2,          4,          8,         1,
                                          2,          4,          8,          2,         2,
                                          4,          8,          sizeof(FI), sizeof(DI), sizeof(LI),
                                          sizeof(II), sizeof(SI), sizeof(FF), sizeof(DD)};
    for (int t = 0; t < DP_DTYPE_COUNT; ++t) EXPECT_EQ(dp_dtype_size(dp_dtype_t(t)), sizes[t]) << t;
    EXPECT_EQ(dp_dtype_size(DP_DTYPE_COUNT), 0u);
}

}  // namespace
}  // namespace deputy::test
