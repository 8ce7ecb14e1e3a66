// An RMA link and exposed memory over the tcp provider on this host: what
// the team proxy and a remote member do in memory mode rdma.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "common/timing.h"
#include "fabric/exposed_memory.h"
#include "fabric/rma_link.h"

namespace deputy::fabric {
namespace {

constexpr uint64_t kDeadline = 10'000'000'000;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 131 + seed + (i >> 12));
    return v;
}

struct Pair {
    ExposedMemory member{"tcp", "127.0.0.1"};
    RmaLink proxy{"tcp", member.address(), "the test's member", "127.0.0.1"};
    uint64_t deadline() const { return timing::now_ns() + kDeadline; }
};

TEST(RmaLinkTest, ReadsAndWritesExposedRangesBitExact) {
    Pair p;
    // 9 MiB + 5: several operations of kRmaOpBytes, an uneven last one.
    const size_t n = 9 * (1 << 20) + 5;
    std::vector<uint8_t> source = pattern(n, 7), result(n + 2, 0xEE);
    auto src = p.member.expose(source.data(), n, FI_REMOTE_READ);
    auto dst = p.member.expose(result.data() + 1, n, FI_REMOTE_WRITE);
    std::vector<uint8_t> staging(n, 0);
    ASSERT_EQ(p.proxy.read({{staging.data(), n, src->remote_base(), src->key()}}, p.deadline()),
              "");
    EXPECT_EQ(staging, source);
    for (auto &b : staging) b ^= 0x5A;
    ASSERT_EQ(p.proxy.write({{staging.data(), n, dst->remote_base(), dst->key()}}, p.deadline()),
              "");
    // Delivered when write() returns: checked at once, with no wait.
    EXPECT_EQ(0, std::memcmp(result.data() + 1, staging.data(), n));
    EXPECT_EQ(result[0], 0xEE);  // the bytes around the range stay the member's
    EXPECT_EQ(result[n + 1], 0xEE);
}

TEST(RmaLinkTest, SeveralPiecesAtOffsetsInOneTransfer) {
    Pair p;
    std::vector<uint8_t> result(4096, 0);
    auto dst = p.member.expose(result.data(), result.size(), FI_REMOTE_WRITE);
    std::vector<uint8_t> a(100, 1), b(200, 2);
    ASSERT_EQ(p.proxy.write({{a.data(), a.size(), dst->remote_base() + 10, dst->key()},
                             {b.data(), b.size(), dst->remote_base() + 3000, dst->key()}},
                            p.deadline()),
              "");
    for (size_t i = 0; i < result.size(); ++i) {
        const uint8_t want = i >= 10 && i < 110 ? 1 : i >= 3000 && i < 3200 ? 2 : 0;
        ASSERT_EQ(result[i], want) << i;
    }
}

// Each refusal on a link of its own: the provider drops the connection of
// a peer that asked for what it was not given, and the link is then broken.
TEST(RmaLinkTest, WhatWasNotExposedIsRefusedAndUntouched) {
    enum Case { kWriteReadOnly, kPastTheEnd, kWrongKey, kRevokedKey };
    for (Case c : {kWriteReadOnly, kPastTheEnd, kWrongKey, kRevokedKey}) {
        SCOPED_TRACE(int(c));
        Pair p;
        std::vector<uint8_t> memory(8192, 0x11);
        auto readable = p.member.expose(memory.data(), 4096, FI_REMOTE_READ);
        std::vector<uint8_t> buf(4096, 0x22);
        // The link works for what is exposed.
        ASSERT_EQ(p.proxy.read({{buf.data(), 64, readable->remote_base(), readable->key()}},
                               p.deadline()),
                  "");
        ASSERT_EQ(buf[0], 0x11);
        const uint64_t base = readable->remote_base(), key = readable->key();
        std::string error;
        switch (c) {
            case kWriteReadOnly:
                error = p.proxy.write({{buf.data(), 16, base, key}}, p.deadline());
                break;
            case kPastTheEnd:
                error = p.proxy.read({{buf.data(), 16, base + 4090, key}}, p.deadline());
                break;
            case kWrongKey:
                error = p.proxy.read({{buf.data(), 16, base, key ^ 1}}, p.deadline());
                break;
            case kRevokedKey:
                readable.reset();
                error = p.proxy.read({{buf.data(), 16, base, key}}, p.deadline());
                break;
        }
        EXPECT_NE(error, "");
        EXPECT_TRUE(p.proxy.broken()) << error;
        EXPECT_NE(p.proxy.read({{buf.data(), 1, base, key}}, p.deadline()), "");
        for (uint8_t b : memory) ASSERT_EQ(b, 0x11);
    }
}

TEST(RmaLinkTest, TheEndpointIsOnTheInterfaceTowardsThePeer) {
    ExposedMemory member("tcp", "127.0.0.1");
    EXPECT_EQ(address_host(member.address(), FI_SOCKADDR_IN), "127.0.0.1");
}

// A member that is gone: the transfer fails by its deadline, never hangs.
TEST(RmaLinkTest, AGoneMemberFailsTheTransferByItsDeadline) {
    auto member = std::make_unique<ExposedMemory>("tcp", "127.0.0.1");
    std::vector<uint8_t> memory(64, 1), buf(64);
    auto range = member->expose(memory.data(), 64, FI_REMOTE_READ);
    const uint64_t base = range->remote_base(), key = range->key();
    RmaLink proxy("tcp", member->address(), "a gone member", "127.0.0.1");
    range.reset();
    member.reset();
    const uint64_t start = timing::now_ns();
    EXPECT_NE(proxy.read({{buf.data(), 64, base, key}}, start + 2'000'000'000), "");
    EXPECT_LT(timing::now_ns() - start, 3'000'000'000u);
    EXPECT_TRUE(proxy.broken());
}

TEST(RmaLinkTest, KeysAreFreshPerRange) {
    ExposedMemory member("tcp", "127.0.0.1");
    std::vector<uint8_t> memory(64);
    auto a = member.expose(memory.data(), 64, FI_REMOTE_READ);
    auto b = member.expose(memory.data(), 64, FI_REMOTE_READ);
    EXPECT_NE(a->key(), b->key());
}

TEST(RmaLinkTest, AProviderThatIsNotThereIsNamed) {
    try {
        ExposedMemory member("no-such-provider", "127.0.0.1");
        FAIL() << "opened";
    } catch (const FabricError &e) {
        EXPECT_NE(std::string(e.what()).find("provider 'no-such-provider' is not available"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace deputy::fabric
