// Completion records say "done" only once the bytes they report are there:
// a batch over registered (direct) memory runs on bounce buffers and its
// data is written back after the batch, so its members' records, in the
// pool or in registered memory, must be published after that write-back
// (ClientSpace::publish, status last), never while the batch runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "agent_test_util.h"

namespace {

using deputy::testing::AgentProcess;

constexpr int kMembers = 16;
constexpr size_t kMember = 256 << 10;

// Runs one batch of kMembers memmoves (registered source to registered
// destination, member i's bytes all 0x10 + i) with each member's record at
// records[i]; a second thread watches the records and, the moment one says
// done, checks its member's destination. Returns the members seen early.
int members_done_before_their_bytes(dp_context_t *ctx, dp_mover_t *mover, uint8_t *heap,
                                    dp_completion_t *records) {
    for (int i = 0; i < kMembers; ++i) {
        std::memset(heap + size_t(i) * kMember, 0x10 + i, kMember);
        std::memset(heap + size_t(kMembers + i) * kMember, 0, kMember);
    }
    std::memset(records, 0, kMembers * sizeof(dp_completion_t));
    auto *members = static_cast<dp_desc_t *>(dp_malloc(ctx, kMembers * sizeof(dp_desc_t)));
    auto *batch_record = static_cast<dp_completion_t *>(dp_malloc(ctx, 32));
    EXPECT_TRUE(members && batch_record);
    if (!members || !batch_record) return -1;
    for (int i = 0; i < kMembers; ++i) {
        dp_desc_t &m = members[i];
        m = dp_desc_t{};
        m.opcode = DP_OP_MEMMOVE;
        m.flags = DP_FLAG_COMPLETION;
        m.completion = reinterpret_cast<uint64_t>(&records[i]);
        m.src = reinterpret_cast<uint64_t>(heap + size_t(i) * kMember);
        m.dst = reinterpret_cast<uint64_t>(heap + size_t(kMembers + i) * kMember);
        m.size = kMember;
    }
    std::atomic<int> early{0};
    std::atomic<bool> started{false};
    std::thread watcher([&] {
        started.store(true);
        for (int i = 0; i < kMembers; ++i) {
            // A member's record, then at once its destination's last byte
            // (written last by the write-back of that member).
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (__atomic_load_n(&records[i].status, __ATOMIC_ACQUIRE) == 0)
                if (std::chrono::steady_clock::now() > deadline) return;  // checked below
            const uint8_t *dst = heap + size_t(kMembers + i) * kMember;
            if (__atomic_load_n(&dst[kMember - 1], __ATOMIC_RELAXED) != uint8_t(0x10 + i) ||
                __atomic_load_n(&dst[0], __ATOMIC_RELAXED) != uint8_t(0x10 + i))
                early.fetch_add(1);
        }
    });
    while (!started.load()) std::this_thread::yield();
    dp_desc_t b{};
    b.opcode = DP_OP_BATCH;
    b.src = reinterpret_cast<uint64_t>(members);
    b.size = kMembers;
    b.flags = DP_FLAG_COMPLETION;
    b.completion = reinterpret_cast<uint64_t>(batch_record);
    EXPECT_EQ(dp_mover_submit(mover, 0, &b), DP_OK);
    EXPECT_EQ(dp_mover_wait(mover, batch_record, DP_WAIT_BLOCK, 10'000'000'000), DP_OK);
    EXPECT_EQ(batch_record->status, DP_COMP_SUCCESS);
    watcher.join();
    for (int i = 0; i < kMembers; ++i) {
        EXPECT_EQ(records[i].status, DP_COMP_SUCCESS) << "member " << i;
        EXPECT_EQ(records[i].bytes_completed, kMember) << "member " << i;
        const uint8_t *dst = heap + size_t(kMembers + i) * kMember;
        size_t wrong = 0;
        for (size_t k = 0; k < kMember; ++k) wrong += dst[k] != uint8_t(0x10 + i);
        EXPECT_EQ(wrong, 0u) << "member " << i;
    }
    dp_free(ctx, members);
    dp_free(ctx, batch_record);
    return early.load();
}

TEST(CompletionRecordTest, BatchMemberRecordsComeAfterTheirBytes) {
    AgentProcess agent;
    ASSERT_TRUE(agent.running());
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    dp_mover_t *mover = nullptr;
    ASSERT_EQ(dp_mover_attach(ctx, &mover), DP_OK);
    std::vector<uint8_t> heap(2 * kMembers * kMember);
    ASSERT_EQ(dp_mem_register(ctx, heap.data(), heap.size()), DP_OK);

    // Members' records in the pool (published in place).
    auto *pool_records =
        static_cast<dp_completion_t *>(dp_malloc(ctx, kMembers * sizeof(dp_completion_t)));
    ASSERT_NE(pool_records, nullptr);
    EXPECT_EQ(members_done_before_their_bytes(ctx, mover, heap.data(), pool_records), 0);

    // Members' records in registered memory (written through the process).
    std::vector<dp_completion_t> direct_records(kMembers + 1);
    auto *aligned = reinterpret_cast<dp_completion_t *>(
        (reinterpret_cast<uintptr_t>(direct_records.data()) + 31) & ~uintptr_t(31));
    ASSERT_EQ(dp_mem_register(ctx, aligned, kMembers * sizeof(dp_completion_t)), DP_OK);
    EXPECT_EQ(members_done_before_their_bytes(ctx, mover, heap.data(), aligned), 0);

    dp_mover_close(mover);
    dp_finalize(ctx);
}

}  // namespace
