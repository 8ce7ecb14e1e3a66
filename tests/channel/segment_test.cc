// memfd segments: creation, the seals a receiver relies on, mapping a
// received fd (and refusing one that could shrink), SCM_RIGHTS passing, and
// no fd left behind.
#include "common/segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "channel/socket_io.h"
#include "channel_test_util.h"
#include "target_command.h"

namespace deputy {
namespace {

using channel::test::count_fds;

TEST(Segment, CreateZeroedSealedAndRoundedToPages) {
    Segment s;
    ASSERT_EQ(Segment::create("test", 5000, &s), DP_OK);
    EXPECT_EQ(s.size(), 8192u);
    const auto *bytes = static_cast<const uint8_t *>(s.data());
    for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(bytes[i], 0) << i;
    int seals = fcntl(s.fd(), F_GET_SEALS);
    EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    EXPECT_NE(ftruncate(s.fd(), 4096), 0);  // the seal holds
    EXPECT_EQ(Segment::create("test", 0, &s), DP_ERR_INVALID);
}

// A segment its writers map first (a client's pool, a team's board): only
// its size is sealed until they did; then no new writable mapping and no
// write(), through any fd of it, while theirs keep writing.
TEST(Segment, AClosableSegmentTakesNoNewWriterOnceClosed) {
    Segment a;
    ASSERT_EQ(Segment::create("closable", 4096, &a, Segment::Pages::prefault,
                              Segment::Writers::closable),
              DP_OK);
    EXPECT_EQ(fcntl(a.fd(), F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
              F_SEAL_SHRINK | F_SEAL_GROW);
    Segment writer;
    ASSERT_EQ(Segment::map(UniqueFd(fcntl(a.fd(), F_DUPFD_CLOEXEC, 0)), 4096, &writer), DP_OK);
    ASSERT_EQ(a.close_to_new_writers(), DP_OK);
    static_cast<uint8_t *>(writer.data())[1] = 9;
    EXPECT_EQ(static_cast<uint8_t *>(a.data())[1], 9);
    Segment late;
    EXPECT_EQ(Segment::map(UniqueFd(fcntl(a.fd(), F_DUPFD_CLOEXEC, 0)), 4096, &late), DP_ERR_IO);
    EXPECT_EQ(pwrite(a.fd(), "x", 1, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(a.close_to_new_writers(), DP_ERR_IO);  // F_SEAL_SEAL: nothing more to seal
}

TEST(Segment, MapSharesBytes) {
    Segment a;
    ASSERT_EQ(Segment::create("test", 4096, &a), DP_OK);
    Segment b;
    ASSERT_EQ(Segment::map(UniqueFd(fcntl(a.fd(), F_DUPFD_CLOEXEC, 0)), 4096, &b), DP_OK);
    static_cast<uint8_t *>(a.data())[100] = 0xAB;
    EXPECT_EQ(static_cast<uint8_t *>(b.data())[100], 0xAB);
    Segment c;
    EXPECT_EQ(Segment::map(UniqueFd(fcntl(a.fd(), F_DUPFD_CLOEXEC, 0)), 8192, &c), DP_ERR_INVALID);
    EXPECT_FALSE(c.valid());
}

// Mapped back to back, an access running off one segment would land in the
// next (in the agent: another client's). A guard page on each side faults.
TEST(SegmentDeathTest, GuardPagesOnBothSidesFault) {
    Segment s;
    ASSERT_EQ(Segment::create("guarded", 8192, &s), DP_OK);
    auto *bytes = static_cast<volatile uint8_t *>(s.data());
    bytes[0] = 1;
    bytes[s.size() - 1] = 1;  // both ends are ours
    EXPECT_DEATH(bytes[-1] = 1, "");
    EXPECT_DEATH(bytes[s.size()] = 1, "");
    Segment m;
    ASSERT_EQ(Segment::map(UniqueFd(fcntl(s.fd(), F_DUPFD_CLOEXEC, 0)), 8192, &m), DP_OK);
    auto *mapped = static_cast<volatile uint8_t *>(m.data());
    EXPECT_EQ(mapped[0], 1);
    EXPECT_DEATH(mapped[-1] = 1, "");
    EXPECT_DEATH(mapped[m.size()] = 1, "");
}

// A lazy segment commits no page until one is touched; a prefaulted one
// has every page resident.
TEST(Segment, LazyCommitsNothingPrefaultCommitsAll) {
    auto resident = [](const Segment &s) {
        std::vector<unsigned char> v(s.size() / 4096);
        EXPECT_EQ(mincore(s.data(), s.size(), v.data()), 0);
        size_t n = 0;
        for (unsigned char c : v) n += c & 1;
        return n;
    };
    Segment lazy, eager;
    ASSERT_EQ(Segment::create("lazy", 64 << 20, &lazy, Segment::Pages::lazy), DP_OK);
    ASSERT_EQ(Segment::create("eager", 1 << 20, &eager), DP_OK);
    EXPECT_EQ(resident(lazy), 0u);
    // qemu-user takes madvise as a hint it may ignore, and does.
    if (!deputy::testing::under_emulator()) {
        EXPECT_EQ(resident(eager), eager.size() / 4096);
    }
    static_cast<volatile uint8_t *>(lazy.data())[5 * 4096] = 7;
    EXPECT_EQ(resident(lazy), 1u);
}

TEST(Segment, MapRefusesWhatCouldShrink) {
    // A memfd without seals, as a hostile peer could send.
    UniqueFd unsealed(memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_TRUE(unsealed.valid());
    ASSERT_EQ(ftruncate(unsealed.get(), 4096), 0);
    Segment s;
    EXPECT_EQ(Segment::map(std::move(unsealed), 0, &s), DP_ERR_DENIED);
    // Not a memfd at all.
    EXPECT_EQ(Segment::map(UniqueFd(open("/dev/null", O_RDWR | O_CLOEXEC)), 0, &s), DP_ERR_DENIED);
    EXPECT_FALSE(s.valid());
}

TEST(Segment, PassedOverSocketAndNoFdLeaks) {
    const int before = count_fds();
    {
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        UniqueFd left(sv[0]), right(sv[1]);
        Segment a;
        ASSERT_EQ(Segment::create("pass", 4096, &a), DP_OK);
        static_cast<uint8_t *>(a.data())[7] = 7;
        const int fd = a.fd();
        const char byte = 'x';
        ASSERT_EQ(channel::sock::send_with_fds(left.get(), &byte, 1, &fd, 1, 1'000'000'000, "test"),
                  DP_OK);
        char got = 0;
        UniqueFd fds[1];
        size_t nfds = 0;
        ASSERT_EQ(channel::sock::recv_with_fds(right.get(), &got, 1, fds, 1, &nfds, 1'000'000'000,
                                               "test"),
                  DP_OK);
        ASSERT_EQ(nfds, 1u);
        EXPECT_EQ(got, 'x');
        EXPECT_EQ(fcntl(fds[0].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        Segment b;
        ASSERT_EQ(Segment::map(std::move(fds[0]), 4096, &b), DP_OK);
        EXPECT_EQ(static_cast<uint8_t *>(b.data())[7], 7);
    }
    EXPECT_EQ(count_fds(), before);
}

TEST(Segment, ExtraFdsAreRefusedAndClosed) {
    const int before = count_fds();
    {
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        UniqueFd left(sv[0]), right(sv[1]);
        int fds[2] = {left.get(), right.get()};
        const char byte = 'x';
        ASSERT_EQ(channel::sock::send_with_fds(left.get(), &byte, 1, fds, 2, 1'000'000'000, "test"),
                  DP_OK);
        char got = 0;
        UniqueFd out[1];
        size_t nfds = 5;
        EXPECT_EQ(channel::sock::recv_with_fds(right.get(), &got, 1, out, 1, &nfds, 1'000'000'000,
                                               "test"),
                  DP_ERR_INVALID);
        EXPECT_EQ(nfds, 0u);
    }
    EXPECT_EQ(count_fds(), before);  // the two received copies were closed
}

}  // namespace
}  // namespace deputy
