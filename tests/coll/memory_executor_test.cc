// The executor is the judge of every algorithm test, so it is tested too:
// it must find deadlocks that only rendezvous sends expose, refuse messages
// whose lengths disagree, move the bytes, and count and track causality.
#include "memory_executor.h"

#include <gtest/gtest.h>

#include "coll/schedule_builder.h"

namespace deputy::test {
namespace {

using Bytes = std::vector<unsigned char>;

coll::ScheduleBuilder builder(int rank, int size) {
    coll::CollectiveArgs args;
    args.collective = coll::Collective::allgather;
    args.rank = rank;
    args.size = size;
    args.count = 4;
    args.dtype = DP_UINT8;
    coll::ScheduleBuilder b(args, "hand-made");
    b.need_scratch(16);
    return b;
}

TEST(MemoryExecutorTest, ExchangesBytesAndCounts) {
    std::vector<coll::Schedule> team;
    for (int r = 0; r < 2; ++r) {
        auto b = builder(r, 2);
        b.send(1 - r, coll::source_region(0, 4));
        b.recv(1 - r, coll::destination_region(4 * static_cast<size_t>(1 - r), 4));
        team.push_back(b.finish());
    }
    const coll::KernelReducer reducer;
    MemoryExecutor ex(team, reducer);
    ex.buffer(0, coll::BufferId::source) = {1, 2, 3, 4};
    ex.buffer(1, coll::BufferId::source) = {5, 6, 7, 8};
    const Execution run = ex.run(3);
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(ex.buffer(0, coll::BufferId::destination), (Bytes{0, 0, 0, 0, 5, 6, 7, 8}));
    EXPECT_EQ(ex.buffer(1, coll::BufferId::destination), (Bytes{1, 2, 3, 4, 0, 0, 0, 0}));
    EXPECT_EQ(run.bytes_sent, (std::vector<size_t>{4, 4}));
    EXPECT_EQ(run.messages_sent, (std::vector<size_t>{1, 1}));
    EXPECT_EQ(run.heard_from, (std::vector<uint64_t>{3, 3}));
}

TEST(MemoryExecutorTest, ReceiveBeforeSendOnBothSidesDeadlocks) {
    std::vector<coll::Schedule> team;
    for (int r = 0; r < 2; ++r) {
        auto b = builder(r, 2);
        const coll::StepId got = b.recv(1 - r, coll::scratch_region(0, 4));
        const coll::StepId deps[] = {got};
        b.send(1 - r, coll::source_region(0, 4), deps);
        team.push_back(b.finish());
    }
    const coll::KernelReducer reducer;
    for (uint64_t seed = 0; seed < 20; ++seed) {
        MemoryExecutor ex(team, reducer);
        const Execution run = ex.run(seed);
        ASSERT_FALSE(run.ok);
        EXPECT_NE(run.error.find("deadlock"), std::string::npos) << run.error;
        EXPECT_NE(run.error.find("posted, unmatched"), std::string::npos) << run.error;
        EXPECT_NE(run.error.find("waiting"), std::string::npos) << run.error;
    }
}

TEST(MemoryExecutorTest, SendsCompleteOnlyWhenReceived) {
    // Each rank sends, and only after that send completes receives: fine
    // with buffered sends, a deadlock with rendezvous ones, which is what
    // the executor models (a schedule must not rely on send buffering).
    std::vector<coll::Schedule> team;
    for (int r = 0; r < 2; ++r) {
        auto b = builder(r, 2);
        const coll::StepId sent = b.send(1 - r, coll::source_region(0, 4));
        const coll::StepId deps[] = {sent};
        b.recv(1 - r, coll::scratch_region(0, 4), deps);
        team.push_back(b.finish());
    }
    const coll::KernelReducer reducer;
    MemoryExecutor ex(team, reducer);
    EXPECT_FALSE(ex.run(1).ok);
}

TEST(MemoryExecutorTest, LengthMismatchIsReported) {
    auto a = builder(0, 2);
    a.send(1, coll::source_region(0, 4));
    auto b = builder(1, 2);
    b.recv(0, coll::scratch_region(0, 3));
    const coll::KernelReducer reducer;
    MemoryExecutor ex({a.finish(), b.finish()}, reducer);
    const Execution run = ex.run(1);
    ASSERT_FALSE(run.ok);
    EXPECT_NE(run.error.find("length mismatch"), std::string::npos) << run.error;
}

TEST(MemoryExecutorTest, AMessageWithoutPartnerIsADeadlock) {
    auto a = builder(0, 2);
    a.send(1, coll::source_region(0, 4));
    auto b = builder(1, 2);
    const coll::KernelReducer reducer;
    MemoryExecutor ex({a.finish(), b.finish()}, reducer);
    const Execution run = ex.run(1);
    ASSERT_FALSE(run.ok);
    EXPECT_NE(run.error.find("rank 0 #0 send"), std::string::npos) << run.error;
}

TEST(MemoryExecutorTest, ReducesAndCopiesLocally) {
    coll::CollectiveArgs args;
    args.collective = coll::Collective::allreduce;
    args.count = 2;
    args.dtype = DP_INT16;
    args.op = DP_MAX;
    coll::ScheduleBuilder b(args, "local");
    b.need_scratch(4);
    b.copy(coll::scratch_region(0, 4), coll::source_region(0, 4));
    b.reduce(coll::destination_region(0, 4), coll::scratch_region(0, 4), coll::source_region(0, 4));
    const coll::KernelReducer reducer;
    MemoryExecutor ex({b.finish()}, reducer);
    const int16_t in[2] = {-3, 9};
    std::memcpy(ex.buffer(0, coll::BufferId::source).data(), in, 4);
    ASSERT_TRUE(ex.run(1).ok);
    int16_t out[2];
    std::memcpy(out, ex.buffer(0, coll::BufferId::destination).data(), 4);
    EXPECT_EQ(out[0], -3);
    EXPECT_EQ(out[1], 9);
}

}  // namespace
}  // namespace deputy::test
