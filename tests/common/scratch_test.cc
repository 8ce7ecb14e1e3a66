// Per-thread scratch buffers: reused without new faults while the thread is
// busy, all given back by trim(), and never more than the cap kept.
#include "common/scratch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace deputy {
namespace {

TEST(Scratch, ABufferOfTheSameClassIsReusedAndTrimGivesEverythingBack) {
    scratch::trim();
    uint8_t *first = nullptr;
    {
        scratch::Buffer a = scratch::get(100 << 10);
        ASSERT_NE(a.data(), nullptr);
        EXPECT_EQ(a.size(), size_t(100 << 10));
        std::memset(a.data(), 1, a.size());
        first = a.data();
    }
    EXPECT_EQ(scratch::cached_bytes(), size_t(128 << 10));  // its class
    {
        scratch::Buffer b = scratch::get(120 << 10);  // same class: the same mapping
        EXPECT_EQ(b.data(), first);
        scratch::Buffer c = scratch::get(1 << 20);  // another class: a new one
        EXPECT_NE(c.data(), first);
    }
    EXPECT_EQ(scratch::cached_bytes(), size_t((128 << 10) + (1 << 20)));
    scratch::trim();
    EXPECT_EQ(scratch::cached_bytes(), 0u);
    EXPECT_EQ(scratch::get(0).data(), nullptr);
}

TEST(Scratch, EachThreadKeepsItsOwnAndTheCapHolds) {
    scratch::trim();
    { scratch::Buffer a = scratch::get(1 << 20); }
    std::thread([] {
        EXPECT_EQ(scratch::cached_bytes(), 0u);
        {
            // Far more than the cap at once: the excess is unmapped when freed.
            std::vector<scratch::Buffer> many;
            for (int i = 0; i < 40; ++i) many.push_back(scratch::get(16 << 20));
        }
        EXPECT_LE(scratch::cached_bytes(), size_t(256) << 20);
        scratch::trim();
    }).join();
    EXPECT_EQ(scratch::cached_bytes(), size_t(1 << 20));
    scratch::trim();
}

}  // namespace
}  // namespace deputy
