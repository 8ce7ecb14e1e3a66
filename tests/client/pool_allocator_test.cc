// The mapped pool's allocator (client/pool_allocator.h): every block it
// hands out is resident (faulted in) when it is handed out, whether its
// pages are new or were faulted for an earlier block — the bitmap that
// spares reused pages the system call must never mark a page it did not
// fault. Blocks are aligned, distinct, and coalesce when freed.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/pool_allocator.h"

namespace {

using deputy::client::PoolAllocator;

const size_t kPage = size_t(sysconf(_SC_PAGESIZE));

// A lazily mapped region, as the agent's pool is to a client: nothing
// resident until touched.
struct Mapping {
    explicit Mapping(size_t bytes) : bytes(bytes) {
        void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(p, MAP_FAILED);
        base = static_cast<std::byte *>(p);
    }
    ~Mapping() { munmap(base, bytes); }
    std::byte *base;
    size_t bytes;
};

// Pages of [p, p + bytes) not resident now.
size_t missing_pages(const void *p, size_t bytes) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + kPage - 1) & ~(kPage - 1);
    std::vector<unsigned char> in((end - begin) / kPage);
    EXPECT_EQ(mincore(reinterpret_cast<void *>(begin), end - begin, in.data()), 0);
    size_t missing = 0;
    for (unsigned char c : in) missing += !(c & 1);
    return missing;
}

TEST(PoolAllocator, EveryBlockIsResidentWhenHandedOut) {
    Mapping m(64 * kPage);
    PoolAllocator pool;
    pool.reset(m.base, m.bytes);
    ASSERT_EQ(missing_pages(m.base, m.bytes), 64u);  // lazily mapped
    // Small blocks (128 bytes each, aligned) fill the first page, then
    // cross into the second.
    std::vector<void *> small;
    while (small.size() * 128 < kPage + 256) {
        void *p = pool.allocate(100);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % PoolAllocator::kAlign, 0u);
        EXPECT_EQ(missing_pages(p, 100), 0u);
        small.push_back(p);
    }
    // The pages beyond what was handed out are still not faulted.
    EXPECT_EQ(missing_pages(m.base + 4 * kPage, 60 * kPage), 60u);
    // A block from the second page (faulted) into the third (not).
    void *next = pool.allocate(kPage);
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(missing_pages(next, kPage), 0u);
    small.push_back(next);
    // Free and allocate again across pages faulted and not: a block that
    // starts on a faulted page and runs onto new ones.
    for (void *p : small) EXPECT_TRUE(pool.release(p));
    void *wide = pool.allocate(5 * kPage + 100);
    ASSERT_NE(wide, nullptr);
    EXPECT_EQ(missing_pages(wide, 5 * kPage + 100), 0u);
    EXPECT_TRUE(pool.release(wide));
    // Reused blocks (pages already faulted: no system call) are resident
    // too, and the whole pool is one free block again.
    for (int i = 0; i < 100; ++i) {
        void *p = pool.allocate(2048);
        ASSERT_EQ(p, m.base);  // first fit: the freed start
        EXPECT_EQ(missing_pages(p, 2048), 0u);
        EXPECT_TRUE(pool.release(p));
    }
    EXPECT_EQ(pool.free_bytes(), m.bytes);
    EXPECT_FALSE(pool.release(m.base + 64));  // never handed out
}

TEST(PoolAllocator, RefusesWhatDoesNotFit) {
    Mapping m(4 * kPage);
    PoolAllocator pool;
    pool.reset(m.base, m.bytes);
    EXPECT_EQ(pool.allocate(0), nullptr);
    EXPECT_EQ(pool.allocate(4 * kPage + 1), nullptr);
    void *all = pool.allocate(4 * kPage);
    ASSERT_EQ(all, m.base);
    EXPECT_EQ(pool.allocate(64), nullptr);
    EXPECT_EQ(pool.free_bytes(), 0u);
    EXPECT_TRUE(pool.release(all));
    EXPECT_EQ(pool.free_bytes(), m.bytes);
}

}  // namespace
