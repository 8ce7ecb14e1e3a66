// HEAP_SHARE, the one control message that carries an fd, from a client
// that may be hostile: the agent maps only a shmem memfd sealed against
// shrinking, of the size announced, once per client, at most max_heap_bytes;
// each refusal is an answer naming the reason and leaves the client
// attached; an fd on any other message, or two fds, ends the connection.
// What the agent maps it reaches in place, and pages the client punches out
// of it read as zeros (no SIGBUS can reach the agent). Afterwards the agent
// holds no fd and no mapping of the attacker's.
#include <deputy/deputy.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <chrono>
#include <vector>

#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "raw_client.h"

namespace {

using deputy::UniqueFd;
using deputy::testing::AgentProcess;
using deputy::testing::eventually;
using deputy::testing::RawClient;
namespace control = deputy::channel::control;
using deputy::channel::MsgType;

constexpr size_t kHeap = 4u << 20;

UniqueFd sealed_memfd(size_t bytes, int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) {
    UniqueFd fd(memfd_create("test-heap", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    EXPECT_TRUE(fd);
    EXPECT_EQ(ftruncate(fd.get(), off_t(bytes)), 0);
    if (seals) {
        EXPECT_EQ(fcntl(fd.get(), F_ADD_SEALS, seals), 0);
    }
    return fd;
}

// One HEAP_SHARE with `fds` attached; the REPLY's status and reason.
dp_status_t share(RawClient &raw, uint64_t addr, uint64_t len, std::vector<int> fds,
                  std::string *reason = nullptr) {
    std::vector<uint8_t> payload;
    control::encode(control::HeapShare{addr, len}, &payload);
    if (control::send_message(raw.fd.get(), MsgType::kHeapShare, payload, fds.data(), fds.size(),
                              1'000'000'000, "test") != DP_OK)
        return DP_ERR_IO;
    MsgType type;
    std::vector<uint8_t> answer;
    if (control::recv_message(raw.fd.get(), control::kMaxControlMessage, &type, &answer, nullptr,
                              0, nullptr, 2'000'000'000, "test") != DP_OK)
        return DP_ERR_IO;
    control::Reply reply;
    std::string error;
    if (type != MsgType::kReply ||
        control::decode(answer.data(), answer.size(), &reply, &error) != DP_OK)
        return DP_ERR_INTERNAL;
    if (reason) *reason = reply.reason;
    return reply.status;
}

// A memmove through the raw ring, its record in the pool: the record's status.
uint8_t memmove_through_agent(RawClient &raw, uint64_t src, uint64_t dst, uint64_t bytes) {
    auto *rec = reinterpret_cast<dp_completion_t *>(raw.pool());
    std::memset(rec, 0, sizeof *rec);
    dp_desc_t d{};
    d.opcode = DP_OP_MEMMOVE;
    d.flags = DP_FLAG_COMPLETION;
    d.completion = reinterpret_cast<uint64_t>(rec);
    d.src = src;
    d.dst = dst;
    d.size = bytes;
    raw.push(d);
    EXPECT_TRUE(eventually([&] { return __atomic_load_n(&rec->status, __ATOMIC_ACQUIRE) != 0; },
                           5000));
    return __atomic_load_n(&rec->status, __ATOMIC_ACQUIRE);
}

// What the agent's fds point at, for a failure message.
std::string fd_targets(const AgentProcess &agent) {
    std::string out;
    const std::string dir = "/proc/" + std::to_string(agent.pid()) + "/fd/";
    for (int fd = 0; fd < 256; ++fd) {
        char target[256];
        const ssize_t n = readlink((dir + std::to_string(fd)).c_str(), target, sizeof target - 1);
        if (n > 0) out += std::to_string(fd) + "->" + std::string(target, size_t(n)) + " ";
    }
    return out;
}

class HeapShareTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(agent.running());
        // Once it answers, the agent has all its own fds (epoll, eventfds).
        std::string info, error;
        ASSERT_EQ(deputy::channel::request_agent_info(agent.socket(), "", 2'000'000'000, &info,
                                                      &error),
                  DP_OK)
            << error;
        // ... and has closed that info connection: the count holds still.
        int last = -1;
        fds_before = agent.count_fds();
        while (fds_before != last) {
            last = fds_before;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            fds_before = agent.count_fds();
        }
        targets_before = fd_targets(agent);
    }
    void expect_fds_back() {
        EXPECT_TRUE(eventually([&] { return agent.count_fds() == fds_before; }, 5000))
            << agent.count_fds() << " fds, " << fds_before << " before\nnow:    "
            << fd_targets(agent) << "\nbefore: " << targets_before;
    }
    std::string targets_before;
    AgentProcess agent{std::vector<std::string>{}};
    int fds_before = 0;
};

TEST_F(HeapShareTest, EachBadShareIsRefusedWithItsReasonAndTheClientStays) {
    RawClient raw;
    ASSERT_TRUE(raw.attach(agent.socket().c_str()));
    // Where the client "maps" its heap: any page-aligned address will do for
    // the refusals, none of which maps anything.
    const uint64_t at = 0x7f0000000000;
    std::string why;
    EXPECT_EQ(share(raw, at, kHeap, {}, &why), DP_ERR_INVALID);
    EXPECT_NE(why.find("no memfd attached"), std::string::npos) << why;

    int pipe_fds[2];
    ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
    EXPECT_EQ(share(raw, at, kHeap, {pipe_fds[0]}, &why), DP_ERR_DENIED);
    EXPECT_NE(why.find("not a memfd on shmem"), std::string::npos) << why;
    close(pipe_fds[0]);
    close(pipe_fds[1]);

    UniqueFd unsealed = sealed_memfd(kHeap, 0);
    EXPECT_EQ(share(raw, at, kHeap, {unsealed.get()}, &why), DP_ERR_DENIED);
    EXPECT_NE(why.find("can still shrink"), std::string::npos) << why;

    UniqueFd smaller = sealed_memfd(kHeap / 2);
    EXPECT_EQ(share(raw, at, kHeap, {smaller.get()}, &why), DP_ERR_INVALID);
    EXPECT_NE(why.find("announced"), std::string::npos) << why;

    UniqueFd right = sealed_memfd(kHeap);
    EXPECT_EQ(share(raw, at, uint64_t(1) << 45, {right.get()}, &why), DP_ERR_TOO_LARGE);
    EXPECT_NE(why.find("max_heap_bytes"), std::string::npos) << why;
    EXPECT_EQ(share(raw, at + 1, kHeap, {right.get()}, &why), DP_ERR_INVALID);
    EXPECT_NE(why.find("'addr'"), std::string::npos) << why;
    EXPECT_EQ(share(raw, at, kHeap + 1, {right.get()}, &why), DP_ERR_INVALID);
    EXPECT_NE(why.find("'len'"), std::string::npos) << why;

    // Still attached: a good share is taken, a second one is not.
    void *mine = mmap(nullptr, kHeap, PROT_READ | PROT_WRITE, MAP_SHARED, right.get(), 0);
    ASSERT_NE(mine, MAP_FAILED);
    EXPECT_EQ(share(raw, reinterpret_cast<uint64_t>(mine), kHeap, {right.get()}, &why), DP_OK) << why;
    UniqueFd another = sealed_memfd(kHeap);
    EXPECT_EQ(share(raw, at, kHeap, {another.get()}, &why), DP_ERR_INVALID);
    EXPECT_NE(why.find("already"), std::string::npos) << why;
    munmap(mine, kHeap);
    raw.fd.reset();
    EXPECT_TRUE(agent.alive());
    expect_fds_back();
}

TEST_F(HeapShareTest, AnFdOnAnotherMessageOrTwoFdsEndTheConnection) {
    {
        RawClient raw;
        ASSERT_TRUE(raw.attach(agent.socket().c_str()));
        UniqueFd fd = sealed_memfd(kHeap);
        std::vector<uint8_t> payload;
        control::encode(control::Register{0x10000, 4096, control::RegionKind::kDirect}, &payload);
        const int fds[] = {fd.get()};
        ASSERT_EQ(control::send_message(raw.fd.get(), MsgType::kRegister, payload, fds, 1,
                                        1'000'000'000, "test"),
                  DP_OK);
        EXPECT_TRUE(deputy::testing::closed_by_agent(raw.fd.get(), 5));
    }
    {
        RawClient raw;
        ASSERT_TRUE(raw.attach(agent.socket().c_str()));
        UniqueFd a = sealed_memfd(kHeap), b = sealed_memfd(kHeap);
        std::vector<uint8_t> payload;
        control::encode(control::HeapShare{0x7f0000000000, kHeap}, &payload);
        const int fds[] = {a.get(), b.get()};
        ASSERT_EQ(control::send_message(raw.fd.get(), MsgType::kHeapShare, payload, fds, 2,
                                        1'000'000'000, "test"),
                  DP_OK);
        EXPECT_TRUE(deputy::testing::closed_by_agent(raw.fd.get(), 5));
    }
    EXPECT_TRUE(agent.alive());
    expect_fds_back();
}

// The agent reaches the heap in place: a memmove between the heap and the
// pool needs no registration. Pages the client punches out read as zeros
// to the agent too, and the agent lives on.
TEST_F(HeapShareTest, TheAgentReachesTheHeapInPlaceAndPunchedPagesReadAsZeros) {
    RawClient raw;
    ASSERT_TRUE(raw.attach(agent.socket().c_str()));
    UniqueFd fd = sealed_memfd(kHeap);
    auto *heap = static_cast<uint8_t *>(
        mmap(nullptr, kHeap, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0));
    ASSERT_NE(heap, MAP_FAILED);
    std::string why;
    ASSERT_EQ(share(raw, reinterpret_cast<uint64_t>(heap), kHeap, {fd.get()}, &why), DP_OK) << why;
    for (size_t i = 0; i < kHeap; ++i) heap[i] = uint8_t(i * 13 + 5);
    uint8_t *pool_dst = raw.pool() + 4096;  // the raw client's pool is 1 MiB
    const uint64_t n = 512u << 10;
    ASSERT_EQ(memmove_through_agent(raw, reinterpret_cast<uint64_t>(heap + 8192),
                                    reinterpret_cast<uint64_t>(pool_dst), n),
              DP_COMP_SUCCESS);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(pool_dst[i], uint8_t((i + 8192) * 13 + 5)) << i;
    // Back into the heap, at its very end.
    ASSERT_EQ(memmove_through_agent(raw, reinterpret_cast<uint64_t>(pool_dst),
                                    reinterpret_cast<uint64_t>(heap + kHeap - n), n),
              DP_COMP_SUCCESS);
    EXPECT_EQ(std::memcmp(heap + kHeap - n, pool_dst, n), 0);
    // One byte past the end is not the heap's.
    EXPECT_EQ(memmove_through_agent(raw, reinterpret_cast<uint64_t>(heap + kHeap - n + 1),
                                    reinterpret_cast<uint64_t>(pool_dst), n),
              DP_COMP_ADDRESS_DENIED);
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(kHeap)), 0);
    ASSERT_EQ(memmove_through_agent(raw, reinterpret_cast<uint64_t>(heap),
                                    reinterpret_cast<uint64_t>(pool_dst), n),
              DP_COMP_SUCCESS);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(pool_dst[i], 0) << i;
    EXPECT_NE(ftruncate(fd.get(), 0), 0) << "the seal keeps the heap from shrinking under the agent";
    munmap(heap, kHeap);
    raw.fd.reset();
    fd.reset();
    EXPECT_TRUE(agent.alive());
    expect_fds_back();
}

// Through the library: dp_init shares the process's heap, heap buffers
// need no dp_mem_register (it is a no-op there) and are reached in place.
TEST_F(HeapShareTest, TheLibrarySharesTheHeapAtInit) {
    dp_config_t c = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&c, &ctx), DP_OK);
    const size_t n = 2u << 20;
    auto *src = static_cast<uint8_t *>(dp_heap_alloc(n, 0, 0));
    auto *dst = static_cast<uint8_t *>(dp_heap_alloc(n, 0, 1));
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(dp_mem_mapped(ctx, src, n), 1);
    EXPECT_EQ(dp_mem_register(ctx, src, n), DP_OK);
    EXPECT_EQ(dp_mem_deregister(ctx, src), DP_OK);
    int on_stack = 0;
    EXPECT_EQ(dp_mem_mapped(ctx, &on_stack, sizeof on_stack), 0);
    for (size_t i = 0; i < n; ++i) src[i] = uint8_t(i * 31 + 7);
    dp_mover_t *mover = nullptr;
    ASSERT_EQ(dp_mover_attach(ctx, &mover), DP_OK);
    auto *rec = static_cast<dp_completion_t *>(dp_malloc(ctx, sizeof(dp_completion_t)));
    dp_desc_t d{};
    d.opcode = DP_OP_MEMMOVE;
    d.flags = DP_FLAG_COMPLETION;
    d.completion = reinterpret_cast<uint64_t>(rec);
    d.src = reinterpret_cast<uint64_t>(src);
    d.dst = reinterpret_cast<uint64_t>(dst);
    d.size = n;
    ASSERT_EQ(dp_mover_submit(mover, 0, &d), DP_OK);
    ASSERT_EQ(dp_mover_wait(mover, rec, DP_WAIT_DEFAULT, -1), DP_OK);
    EXPECT_EQ(rec->status, DP_COMP_SUCCESS);
    EXPECT_EQ(std::memcmp(src, dst, n), 0);
    dp_free(ctx, rec);
    dp_mover_close(mover);
    ASSERT_EQ(dp_finalize(ctx), DP_OK);
    // The heap outlives the context.
    EXPECT_EQ(std::memcmp(src, dst, n), 0);
    EXPECT_EQ(dp_heap_free(src), 1);
    EXPECT_EQ(dp_heap_free(dst), 1);
}

}  // namespace
