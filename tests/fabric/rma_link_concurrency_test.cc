// The RMA link and exposed memory under the threads that use them (run
// under TSan by the README's test command): a team proxy reads sources on
// one thread and writes results on another through one RmaLink, while the
// member's posting threads expose and revoke ranges of their own on the
// same ExposedMemory and its progress thread serves the proxy.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "common/timing.h"
#include "fabric/exposed_memory.h"
#include "fabric/rma_link.h"

namespace deputy::fabric {
namespace {

constexpr uint64_t kDeadlineNs = 30'000'000'000;

TEST(RmaLinkConcurrency, ReadsAndWritesFromTwoThreadsBesideExposingThreads) {
    constexpr size_t kBytes = 256 << 10;
    constexpr int kRounds = 40;
    // The member's memory outlives its endpoint: the provider's progress
    // thread reads and writes it inside system calls, ordered with the
    // proxy's completions by the kernel's sockets, which TSan cannot see;
    // joining that thread (the endpoint's end) is the order it can see.
    std::vector<uint8_t> source(kBytes), result(kBytes, 0);
    for (size_t i = 0; i < kBytes; ++i) source[i] = uint8_t(i * 7 + 3);
    {
        ExposedMemory member("tcp", "127.0.0.1");
        RmaLink proxy("tcp", member.address(), "the test's member", "127.0.0.1");
        auto readable = member.expose(source.data(), kBytes, FI_REMOTE_READ);
        auto writable = member.expose(result.data(), kBytes, FI_REMOTE_WRITE);
        std::atomic<bool> stop{false};
        std::atomic<int> exposed{0};
        // The member's posting threads: ranges of their own, exposed and revoked.
        std::vector<std::thread> posters;
        for (int t = 0; t < 3; ++t)
            posters.emplace_back([&, t] {
                std::vector<uint8_t> mine(4096, uint8_t(t));
                while (!stop.load()) {
                    auto r = member.expose(mine.data(), mine.size(),
                                           t % 2 ? FI_REMOTE_READ : FI_REMOTE_WRITE);
                    exposed.fetch_add(1);
                }
            });
        // The proxy's two threads: one reads the source, one writes the result.
        std::atomic<int> read_errors{0}, write_errors{0}, wrong{0};
        std::thread reader([&] {
            std::vector<uint8_t> block(kBytes);
            for (int k = 0; k < kRounds; ++k) {
                std::memset(block.data(), 0, kBytes);
                if (!proxy.read({{block.data(), kBytes, readable->remote_base(), readable->key()}},
                                timing::now_ns() + kDeadlineNs)
                         .empty())
                    read_errors.fetch_add(1);
                else if (block != source)
                    wrong.fetch_add(1);
            }
        });
        std::thread writer([&] {
            std::vector<uint8_t> block(kBytes);
            for (int k = 0; k < kRounds; ++k) {
                // Each round writes its own pattern into its own quarter.
                const size_t quarter = kBytes / 4, at = size_t(k % 4) * quarter;
                std::memset(block.data(), k + 1, quarter);
                if (!proxy.write({{block.data(), quarter, writable->remote_base() + at,
                                   writable->key()}},
                                 timing::now_ns() + kDeadlineNs)
                         .empty())
                    write_errors.fetch_add(1);
            }
        });
        reader.join();
        writer.join();
        stop.store(true);
        for (auto &t : posters) t.join();
        EXPECT_EQ(read_errors.load(), 0);
        EXPECT_EQ(write_errors.load(), 0);
        EXPECT_EQ(wrong.load(), 0);
        EXPECT_FALSE(proxy.broken());
        EXPECT_GT(exposed.load(), 0);
    }
    // The last round of each quarter is what it holds, delivered.
    for (size_t q = 0; q < 4; ++q) {
        const uint8_t want = uint8_t(kRounds - 4 + int(q) + 1);
        for (size_t i = 0; i < kBytes / 4; ++i)
            ASSERT_EQ(result[q * (kBytes / 4) + i], want) << q << " " << i;
    }
}

}  // namespace
}  // namespace deputy::fabric
