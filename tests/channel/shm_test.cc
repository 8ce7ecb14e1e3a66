// The shm transport on its own: region layout checks at attach, ring
// wrap-around with frames of every alignment, and a hostile or corrupt peer
// (indices out of range, oversize or malformed frames) refused with exact
// statuses instead of out-of-bounds copies.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "channel/transport/shm/ring.h"
#include "channel/transport/shm/transport.h"
#include "channel_test_util.h"

namespace deputy::channel::shm {
namespace {

using test::kTestTimeoutNs;
using test::pattern;
using test::receive;
using test::Received;

// Both sides of a channel in one process, over one segment (no liveness
// socket: the closed flags are the only way a side learns the other left).
struct Local {
    std::shared_ptr<Segment> segment = std::make_shared<Segment>();
    std::unique_ptr<Transport> creator, attacher;

    explicit Local(size_t ring, TransportOptions options = {}) {
        EXPECT_EQ(Segment::create("test", region_bytes(ring), segment.get()), DP_OK);
        EXPECT_EQ(format_region(segment->data(), segment->size(), ring), DP_OK);
        EXPECT_EQ(
            attach(segment, 0, region_bytes(ring), Side::kCreator, UniqueFd(), options, &creator),
            DP_OK);
        EXPECT_EQ(
            attach(segment, 0, region_bytes(ring), Side::kAttacher, UniqueFd(), options, &attacher),
            DP_OK);
    }
    uint8_t *region() { return static_cast<uint8_t *>(segment->data()); }
    // Ring 0 (creator -> attacher) control words and data.
    RingControl *control(int ring) {
        return reinterpret_cast<RingControl *>(region() + 256) + ring;
    }
    uint8_t *data(int ring, size_t ring_bytes) { return region() + 4096 + ring * ring_bytes; }
};

TEST(ShmLayout, RegionSizesAndFormatChecks) {
    EXPECT_EQ(region_bytes(64), 4096u + 128u);
    EXPECT_EQ(region_bytes(1 << 20), 4096u + (2u << 20));
    std::vector<uint8_t> small(region_bytes(64));
    EXPECT_EQ(format_region(small.data(), small.size(), 64), DP_OK);
    EXPECT_EQ(format_region(small.data(), small.size(), 128), DP_ERR_INVALID);  // too small
    EXPECT_EQ(format_region(small.data(), small.size(), 96), DP_ERR_INVALID);   // not 2^k
    EXPECT_EQ(format_region(small.data(), small.size(), 32), DP_ERR_INVALID);   // below 64
}

TEST(ShmLayout, AttachChecksTheRegion) {
    auto segment = std::make_shared<Segment>();
    ASSERT_EQ(Segment::create("test", region_bytes(1024), segment.get()), DP_OK);
    std::unique_ptr<Transport> t;
    // Not formatted: no magic.
    EXPECT_EQ(attach(segment, 0, segment->size(), Side::kCreator, UniqueFd(), {}, &t),
              DP_ERR_INVALID);
    ASSERT_EQ(format_region(segment->data(), segment->size(), 1024), DP_OK);
    // Outside the segment, misaligned, or smaller than the header says.
    EXPECT_EQ(attach(segment, 128, segment->size(), Side::kCreator, UniqueFd(), {}, &t),
              DP_ERR_INVALID);
    EXPECT_EQ(attach(segment, 8, 4096, Side::kCreator, UniqueFd(), {}, &t), DP_ERR_INVALID);
    EXPECT_EQ(attach(segment, 0, region_bytes(512), Side::kCreator, UniqueFd(), {}, &t),
              DP_ERR_INVALID);
    // A ring size the peer rewrote to something absurd.
    reinterpret_cast<uint64_t *>(segment->data())[2] = 3;
    EXPECT_EQ(attach(segment, 0, segment->size(), Side::kCreator, UniqueFd(), {}, &t),
              DP_ERR_INVALID);
    EXPECT_FALSE(t);
}

// Frames of every length modulo 8 through a 64-byte ring, many laps, both
// directions; frames bigger than the ring stream through it.
TEST(ShmRing, WrapAroundEveryAlignment) {
    Local ch(64);
    ASSERT_TRUE(ch.creator && ch.attacher);
    for (auto [from, to] : {std::pair{ch.creator.get(), ch.attacher.get()},
                            std::pair{ch.attacher.get(), ch.creator.get()}}) {
        std::thread sender([from = from] {
            for (uint32_t i = 0; i < 400; ++i) {
                auto bytes = pattern(i % 131, i);
                ASSERT_EQ(from->send(MsgType::kData, bytes.data(), bytes.size(), kTestTimeoutNs),
                          DP_OK);
            }
        });
        for (uint32_t i = 0; i < 400; ++i) {
            Received r = receive(*to);
            ASSERT_EQ(r.status, DP_OK) << i;
            ASSERT_EQ(r.bytes, pattern(i % 131, i)) << i;
        }
        sender.join();
    }
}

TEST(ShmRing, ClosedPeerIsNoticedWithoutASocket) {
    Local ch(4096);
    ASSERT_EQ(ch.creator->send(MsgType::kData, "last", 4, 0), DP_OK);
    ch.creator.reset();  // closes: sets its flag and rings every bell
    Received r = receive(*ch.attacher);
    ASSERT_EQ(r.status, DP_OK);
    EXPECT_EQ(receive(*ch.attacher).status, DP_ERR_AGENT_LOST);
    EXPECT_EQ(ch.attacher->send(MsgType::kData, "x", 1, 0), DP_ERR_AGENT_LOST);
}

TEST(ShmRing, FullRingTimesOutThenRecovers) {
    TransportOptions options;
    options.spin_ns = 0;  // straight to the futex
    Local ch(64, options);
    std::vector<uint8_t> bytes(56);  // 8 + 56 = one full ring
    ASSERT_EQ(ch.creator->send(MsgType::kData, bytes.data(), bytes.size(), 0), DP_OK);
    EXPECT_EQ(ch.creator->send(MsgType::kData, bytes.data(), bytes.size(), 10'000'000),
              DP_ERR_TIMEOUT);
    ASSERT_EQ(receive(*ch.attacher).status, DP_OK);
    EXPECT_EQ(ch.creator->send(MsgType::kData, bytes.data(), bytes.size(), 0), DP_OK);
    EXPECT_EQ(receive(*ch.attacher).status, DP_OK);
}

TEST(ShmHostilePeer, TailBeyondTheRingIsRefused) {
    Local ch(1024);
    // The creator's producer index jumps by more than a ring.
    std::atomic_ref<uint64_t>(ch.control(0)->tail).store(4096);
    EXPECT_EQ(receive(*ch.attacher, 0).status, DP_ERR_INVALID);
    EXPECT_EQ(receive(*ch.attacher, 0).status, DP_ERR_IO);  // the channel stays broken
}

TEST(ShmHostilePeer, HeadBeyondTheTailIsRefused) {
    Local ch(64);
    std::vector<uint8_t> bytes(56);
    ASSERT_EQ(ch.creator->send(MsgType::kData, bytes.data(), bytes.size(), 0), DP_OK);
    // The consumer claims to have read bytes that were never written.
    std::atomic_ref<uint64_t>(ch.control(0)->head).store(1000);
    EXPECT_EQ(ch.creator->send(MsgType::kData, bytes.data(), bytes.size(), 0), DP_ERR_INVALID);
}

TEST(ShmHostilePeer, OversizeOrMalformedFrameIsRefused) {
    for (int variant = 0; variant < 3; ++variant) {
        TransportOptions options;
        options.max_message = 100;
        Local ch(1024, options);
        uint8_t *slot = ch.data(0, 1024);
        encode_frame_header(slot, MsgType::kData, 8);
        if (variant == 0) put_u32(slot, 101);  // above the receiver's limit
        if (variant == 1) slot[6] = 'X';       // bad magic
        if (variant == 2) slot[4] = 99;        // unknown type
        std::atomic_ref<uint64_t>(ch.control(0)->tail).store(16);
        const dp_status_t expected = variant == 0 ? DP_ERR_TOO_LARGE : DP_ERR_INVALID;
        EXPECT_EQ(receive(*ch.attacher, 0).status, expected) << variant;
        EXPECT_EQ(receive(*ch.attacher, 0).status, DP_ERR_IO) << variant;
    }
}

TEST(ShmSetup, OfferOfAnUnsealedMemfdIsDenied) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    UniqueFd left(sv[0]), right(sv[1]);
    const int before = test::count_fds();
    {
        // A hand-made offer carrying an unsealed memfd.
        UniqueFd memfd(memfd_create("hostile", MFD_CLOEXEC));
        ASSERT_EQ(ftruncate(memfd.get(), 8192), 0);
        uint8_t message[kFrameHeaderBytes + 24];
        encode_frame_header(message, MsgType::kShmOffer, 24);
        put_u64(message + 8, 8192);
        put_u64(message + 16, 0);
        put_u64(message + 24, 8192);
        int fd = memfd.get();
        ASSERT_EQ(sock::send_with_fds(left.get(), message, sizeof(message), &fd, 1, 0, "test"),
                  DP_OK);
        std::shared_ptr<Segment> segment;
        size_t offset = 0, bytes = 0;
        EXPECT_EQ(recv_offer(right.get(), kTestTimeoutNs, &segment, &offset, &bytes),
                  DP_ERR_DENIED);
        EXPECT_FALSE(segment);
    }
    EXPECT_EQ(test::count_fds(), before);
}

TEST(ShmSetup, OfferOfARegionOutsideTheSegmentIsRefused) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    UniqueFd left(sv[0]), right(sv[1]);
    Segment s;
    ASSERT_EQ(Segment::create("test", 8192, &s), DP_OK);
    ASSERT_EQ(send_offer(left.get(), s, 4096, 8192, 0), DP_OK);
    std::shared_ptr<Segment> segment;
    size_t offset = 0, bytes = 0;
    EXPECT_EQ(recv_offer(right.get(), kTestTimeoutNs, &segment, &offset, &bytes), DP_ERR_INVALID);
}

}  // namespace
}  // namespace deputy::channel::shm
