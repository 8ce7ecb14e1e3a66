// The shared heap (client/shared_heap.h, include/deputy/heap.h) as an
// allocator: blocks are aligned, distinct and reused; zeroed blocks are
// zeros even when reused; pages go back to the kernel when the top of the
// heap is freed and when freed blocks exceed what is kept; a full heap says
// so with NULL; a forked child gets its own copy of the live blocks; threads
// allocate and free at once. Each test runs in a process of its own (ctest),
// so each sets $DEPUTY_HEAP_BYTES before the heap is first made.
// (Freed pages are kept up to kKeepDirtyBytes: see FreedPagesAreKept...)
#include <deputy/heap.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "client/shared_heap.h"

namespace {

using deputy::client::SharedHeap;

SharedHeap &heap_of(size_t bytes) {
    setenv("DEPUTY_HEAP_BYTES", std::to_string(bytes).c_str(), 1);
    SharedHeap *h = SharedHeap::instance();
    EXPECT_NE(h, nullptr);
    EXPECT_EQ(h->size(), bytes);
    return *h;
}

// Pages of the heap's memfd the kernel holds now.
uint64_t committed(const SharedHeap &h) {
    struct stat st {};
    EXPECT_EQ(fstat(h.fd(), &st), 0);
    return uint64_t(st.st_blocks) * 512;
}

void fill(void *p, size_t n, uint8_t seed) {
    auto *b = static_cast<uint8_t *>(p);
    for (size_t i = 0; i < n; ++i) b[i] = uint8_t(seed + i * 7);
}
bool holds(const void *p, size_t n, uint8_t seed) {
    auto *b = static_cast<const uint8_t *>(p);
    for (size_t i = 0; i < n; ++i)
        if (b[i] != uint8_t(seed + i * 7)) return false;
    return true;
}

TEST(SharedHeap, BlocksAreAlignedDistinctAndKeepTheirBytes) {
    SharedHeap &h = heap_of(64u << 20);
    const size_t sizes[] = {1, 4095, 4096, 4097, 65536, 1u << 20, 3u << 20};
    const size_t aligns[] = {0, 64, 4096, 65536, 1u << 21};
    struct Block { void *p; size_t n; uint8_t seed; };
    std::vector<Block> blocks;
    uint8_t seed = 1;
    for (size_t n : sizes)
        for (size_t a : aligns) {
            void *p = dp_heap_alloc(n, a, 0);
            ASSERT_NE(p, nullptr) << n << " bytes aligned " << a;
            EXPECT_TRUE(h.contains(p, n));
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (a < 4096 ? 4096 : a), 0u);
            EXPECT_GE(dp_heap_usable_size(p), n);
            EXPECT_EQ(dp_heap_usable_size(p) % 4096, 0u);
            fill(p, n, seed);
            blocks.push_back({p, n, seed++});
        }
    for (const Block &b : blocks) EXPECT_TRUE(holds(b.p, b.n, b.seed)) << b.n;
    for (const Block &b : blocks) EXPECT_EQ(dp_heap_free(b.p), 1);
    EXPECT_EQ(h.stats().live_blocks, 0u);
    EXPECT_EQ(h.stats().top, 0u) << "everything freed: the used span is empty again";
}

TEST(SharedHeap, RefusesWhatIsNotItsBlockAndChangesNothing) {
    SharedHeap &h = heap_of(16u << 20);
    void *p = dp_heap_alloc(8192, 0, 0);
    ASSERT_NE(p, nullptr);
    int on_stack = 0;
    EXPECT_EQ(dp_heap_free(&on_stack), 0);
    EXPECT_EQ(dp_heap_free(static_cast<char *>(p) + 4096), 0) << "inside a block, not its start";
    EXPECT_EQ(dp_heap_free(nullptr), 0);
    EXPECT_EQ(dp_heap_usable_size(&on_stack), 0u);
    EXPECT_EQ(dp_heap_contains(&on_stack, 4), 0);
    EXPECT_EQ(h.stats().live_blocks, 1u);
    EXPECT_EQ(dp_heap_free(p), 1);
    EXPECT_EQ(dp_heap_free(p), 0) << "a second free of the same block";
    EXPECT_EQ(dp_heap_alloc(0, 0, 0), nullptr);
    EXPECT_EQ(dp_heap_alloc(4096, 3, 0), nullptr) << "alignment not a power of two";
    EXPECT_EQ(dp_heap_alloc(4096, 4u << 20, 0), nullptr) << "alignment above 2 MiB";
}

TEST(SharedHeap, ZeroedBlocksAreZerosEvenWhenReused) {
    heap_of(64u << 20);
    void *guard = nullptr;
    for (int round = 0; round < 3; ++round) {
        void *p = dp_heap_alloc(1u << 20, 0, 1);
        ASSERT_NE(p, nullptr);
        const auto *b = static_cast<const uint8_t *>(p);
        for (size_t i = 0; i < (1u << 20); ++i) ASSERT_EQ(b[i], 0) << "round " << round << " byte " << i;
        std::memset(p, 0xa5, 1u << 20);
        // A block above keeps the freed one below the top: it is reused dirty.
        if (!guard) guard = dp_heap_alloc(4096, 0, 0);
        EXPECT_EQ(dp_heap_free(p), 1);
    }
    dp_heap_free(guard);
}

// Freed blocks stay committed for reuse (no page faults on the next
// allocation of the size), wherever they are, up to kKeepDirtyBytes; beyond
// it the pages go back to the kernel.
TEST(SharedHeap, FreedPagesAreKeptForReuseUpToTheLimit) {
    SharedHeap &h = heap_of(1u << 30);
    const uint64_t before = committed(h);
    void *top = dp_heap_alloc(32u << 20, 0, 0);
    ASSERT_NE(top, nullptr);
    std::memset(top, 1, 32u << 20);
    EXPECT_GE(committed(h), before + (32u << 20));
    dp_heap_free(top);
    EXPECT_EQ(h.stats().top, 0u);
    EXPECT_EQ(h.stats().dirty_bytes, 32u << 20) << "the top of the heap, freed, is kept";
    EXPECT_GE(committed(h), before + (32u << 20));
    void *again = dp_heap_alloc(32u << 20, 0, 1);
    EXPECT_EQ(again, top) << "the same place, its pages still there";
    const auto *b = static_cast<const uint8_t *>(again);
    for (size_t i = 0; i < (32u << 20); i += 4093) ASSERT_EQ(b[i], 0) << "zeroed on request";
    dp_heap_free(again);
    // Beyond the limit, pages go back.
    const size_t big = SharedHeap::kKeepDirtyBytes / 2 + (16u << 20);
    void *a = dp_heap_alloc(big, 0, 0);
    void *sep1 = dp_heap_alloc(4096, 0, 0);
    void *c = dp_heap_alloc(big, 0, 0);
    void *sep2 = dp_heap_alloc(4096, 0, 0);
    ASSERT_TRUE(a && c && sep1 && sep2);
    std::memset(a, 2, big);
    std::memset(c, 3, big);
    dp_heap_free(a);
    EXPECT_EQ(h.stats().dirty_bytes, big) << "kept: below the limit";
    EXPECT_GE(committed(h), before + 2 * big);
    dp_heap_free(c);
    EXPECT_LE(h.stats().dirty_bytes, SharedHeap::kKeepDirtyBytes / 2);
    EXPECT_LE(committed(h), before + big + (1u << 20));
    dp_heap_free(sep1);
    dp_heap_free(sep2);
    EXPECT_EQ(h.stats().top, 0u);
    EXPECT_LE(h.stats().dirty_bytes, SharedHeap::kKeepDirtyBytes);
}

TEST(SharedHeap, AFullHeapAnswersNullAndServesAgainOnceFreed) {
    SharedHeap &h = heap_of(8u << 20);
    void *a = dp_heap_alloc(6u << 20, 0, 0);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(dp_heap_alloc(4u << 20, 0, 0), nullptr);
    EXPECT_EQ(dp_heap_alloc(9u << 20, 0, 0), nullptr);
    EXPECT_EQ(dp_heap_alloc(SIZE_MAX, 0, 0), nullptr);
    void *b = dp_heap_alloc(2u << 20, 0, 0);
    EXPECT_NE(b, nullptr) << "what is left still serves";
    dp_heap_free(a);
    void *c = dp_heap_alloc(4u << 20, 0, 0);
    EXPECT_NE(c, nullptr);
    dp_heap_free(b);
    dp_heap_free(c);
    EXPECT_EQ(h.stats().live_bytes, 0u);
}

TEST(SharedHeap, ZeroBytesInTheEnvironmentDisablesIt) {
    setenv("DEPUTY_HEAP_BYTES", "0", 1);
    EXPECT_EQ(SharedHeap::instance(), nullptr);
    EXPECT_EQ(dp_heap_alloc(1u << 20, 0, 0), nullptr);
    int x;
    EXPECT_EQ(dp_heap_contains(&x, 1), 0);
    EXPECT_EQ(dp_heap_free(&x), 0);
}

// The child sees the blocks as they were at fork, then each side writes its
// own copy: nothing either writes afterwards reaches the other.
TEST(SharedHeap, AForkedChildGetsItsOwnCopyOfTheLiveBlocks) {
    SharedHeap &h = heap_of(256u << 20);
    const size_t n = 3u << 20;
    void *kept = dp_heap_alloc(n, 0, 0);
    void *freed = dp_heap_alloc(n, 0, 0);
    ASSERT_TRUE(kept && freed);
    fill(kept, n, 11);
    dp_heap_free(freed);
    int to_child[2], to_parent[2];
    ASSERT_EQ(pipe(to_child), 0);
    ASSERT_EQ(pipe(to_parent), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        char c;
        int code = 0;
        if (!holds(kept, n, 11)) code |= 1;
        if (read(to_child[0], &c, 1) != 1) code |= 2;  // the parent wrote its copy by now
        if (!holds(kept, n, 11)) code |= 4;
        fill(kept, n, 99);
        void *mine = dp_heap_alloc(n, 0, 1);
        if (!mine || !h.contains(mine, n)) code |= 8;
        else if (static_cast<uint8_t *>(mine)[n - 1] != 0) code |= 16;
        if (write(to_parent[1], "x", 1) != 1) code |= 32;
        _exit(code);
    }
    fill(kept, n, 55);
    ASSERT_EQ(write(to_child[1], "x", 1), 1);
    char c;
    ASSERT_EQ(read(to_parent[0], &c, 1), 1);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "bits: 1/4 child saw other bytes, 8/16 child's own "
                                         "allocation failed or was not zeros";
    EXPECT_TRUE(holds(kept, n, 55)) << "the child's writes reached the parent";
    for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
    EXPECT_EQ(dp_heap_free(kept), 1);
}

TEST(SharedHeap, ThreadsAllocateAndFreeAtOnce) {
    SharedHeap &h = heap_of(512u << 20);
    std::vector<std::thread> threads;
    std::vector<int> bad(4, 0);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([t, &bad] {
            std::mt19937 rng{uint32_t(t)};
            std::vector<std::pair<void *, size_t>> mine;
            for (int i = 0; i < 2000; ++i) {
                if (mine.size() < 16 && (rng() & 1)) {
                    const size_t n = 4096 + rng() % (256u << 10);
                    void *p = dp_heap_alloc(n, 0, 0);
                    if (!p) { ++bad[size_t(t)]; continue; }
                    fill(p, n, uint8_t(t * 16 + i));
                    mine.push_back({p, n});
                    mine.back().second |= size_t(uint8_t(t * 16 + i)) << 48;
                } else if (!mine.empty()) {
                    auto [p, tagged] = mine.back();
                    mine.pop_back();
                    const size_t n = tagged & ((size_t(1) << 48) - 1);
                    if (!holds(p, n, uint8_t(tagged >> 48))) ++bad[size_t(t)];
                    if (dp_heap_free(p) != 1) ++bad[size_t(t)];
                }
            }
            for (auto [p, tagged] : mine) dp_heap_free(p);
        });
    for (auto &th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[size_t(t)], 0) << "thread " << t;
    EXPECT_EQ(h.stats().live_blocks, 0u);
    EXPECT_EQ(h.stats().top, 0u);
}

}  // namespace
