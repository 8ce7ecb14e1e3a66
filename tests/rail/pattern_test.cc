// The page pattern: deterministic per (seed, device, page), and the checker
// reports the exact page, offset and bytes of a difference.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/rail/pattern.h"

namespace deputy::rail {
namespace {

std::vector<uint8_t> page(size_t len, uint64_t seed, uint32_t device, uint64_t index) {
    std::vector<uint8_t> out(len);
    fill_page(out.data(), len, seed, device, index);
    return out;
}

TEST(RailPattern, DeterministicAndDistinct) {
    EXPECT_EQ(page(4096, 1, 0, 5), page(4096, 1, 0, 5));
    EXPECT_NE(page(4096, 1, 0, 5), page(4096, 1, 0, 6));
    EXPECT_NE(page(4096, 1, 0, 5), page(4096, 1, 1, 5));
    EXPECT_NE(page(4096, 1, 0, 5), page(4096, 2, 0, 5));
}

TEST(RailPattern, OddLengthsArePrefixesOfTheStream) {
    // A 13-byte page holds the first 13 bytes of the same page's 16-byte stream.
    auto full = page(16, 9, 3, 11);
    auto part = page(13, 9, 3, 11);
    EXPECT_EQ(0, std::memcmp(full.data(), part.data(), 13));
    auto one = page(1, 9, 3, 11);
    EXPECT_EQ(one[0], full[0]);
}

TEST(RailPattern, VerifyPassesOnTheRightBytes) {
    const size_t ps = 1000;
    std::vector<uint8_t> buf(ps * 7);
    for (uint64_t p = 0; p < 7; ++p) fill_page(buf.data() + p * ps, ps, 42, 1, p);
    VerifyReport r = verify_pages(buf.data(), ps, 7, 0, 42, 1, 8);
    EXPECT_EQ(r.checked_bytes, 7000u);
    EXPECT_EQ(r.bad_pages, 0u);
    EXPECT_EQ(r.bad_bytes, 0u);
    EXPECT_TRUE(r.first.empty());
}

TEST(RailPattern, VerifyReportsPageOffsetAndBytes) {
    const size_t ps = 4096;
    std::vector<uint8_t> buf(ps * 4);
    for (uint64_t p = 0; p < 4; ++p) fill_page(buf.data() + p * ps, ps, 7, 0, p);
    uint8_t expected = buf[2 * ps + 100];
    buf[2 * ps + 100] ^= 0xFF;
    buf[2 * ps + 200] ^= 0x01;
    std::memset(buf.data() + 3 * ps, 0, ps);  // a page never written
    VerifyReport r = verify_pages(buf.data(), ps, 4, 0, 7, 0, 8);
    ASSERT_EQ(r.bad_pages, 2u);
    ASSERT_EQ(r.first.size(), 2u);
    EXPECT_EQ(r.first[0].page, 2u);
    EXPECT_EQ(r.first[0].offset, 100u);
    EXPECT_EQ(r.first[0].expected, expected);
    EXPECT_EQ(r.first[0].actual, uint8_t(expected ^ 0xFF));
    EXPECT_EQ(r.first[0].bytes_differ, 2u);
    EXPECT_EQ(r.first[1].page, 3u);
    EXPECT_EQ(r.bad_bytes, 2u + r.first[1].bytes_differ);
    char want[128];
    std::snprintf(want, sizeof(want),
                  "device 0 page 2 offset 100: expected 0x%02x got 0x%02x (2 bytes of the page differ)",
                  expected, uint8_t(expected ^ 0xFF));
    EXPECT_EQ(r.first[0].describe(), want);
}

// A device's second buffer holds its pages from `pages` on: checked as such
// it passes; checked as the first buffer (a write to the wrong buffer) it
// fails on every page.
TEST(RailPattern, VerifyFromAFirstPage) {
    const size_t ps = 256;
    std::vector<uint8_t> buf(ps * 3);
    for (uint64_t p = 0; p < 3; ++p) fill_page(buf.data() + p * ps, ps, 5, 2, 3 + p);
    EXPECT_EQ(verify_pages(buf.data(), ps, 3, 3, 5, 2, 4).bad_pages, 0u);
    VerifyReport wrong = verify_pages(buf.data(), ps, 3, 0, 5, 2, 4);
    EXPECT_EQ(wrong.bad_pages, 3u);
    ASSERT_FALSE(wrong.first.empty());
    EXPECT_EQ(wrong.first[0].page, 0u);
}

TEST(RailPattern, ReportIsCappedButCountsEverything) {
    const size_t ps = 64;
    std::vector<uint8_t> buf(ps * 10, 0);  // nothing written
    VerifyReport r = verify_pages(buf.data(), ps, 10, 0, 1, 0, 3);
    EXPECT_EQ(r.bad_pages, 10u);
    EXPECT_EQ(r.first.size(), 3u);
    VerifyReport total;
    total.merge(r, 4);
    total.merge(r, 4);
    EXPECT_EQ(total.bad_pages, 20u);
    EXPECT_EQ(total.first.size(), 4u);
}

}  // namespace
}  // namespace deputy::rail
