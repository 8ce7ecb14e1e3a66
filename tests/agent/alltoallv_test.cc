// dp_ialltoallv against a real agent (2 engines): uneven counts with
// zeros, a member that sends nothing and blocks in shuffled order with gaps
// between them, 1..4 members, mapped, direct and staged memory; results
// bit-exact, and every byte of a destination outside its receive blocks
// (gaps, guards before and after) as it was. Then what must fail, on every
// member and with nothing written: counts that disagree, a displacement
// beyond the member's buffer, a count whose bytes overflow; and what the
// library refuses before posting.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "coll/vector_layout.h"
#include "coll_test_util.h"

namespace {

using deputy::test::VectorLayout;
using deputy::testing::AgentProcess;
using deputy::testing::kAllMemory;
using deputy::testing::Memory;
using deputy::testing::name;
using deputy::testing::Team;

constexpr size_t kGuard = 64;  // bytes before and after each destination
constexpr uint8_t kUntouched = 0xC3;

// What one alltoallv left: each member's buffers and its status.
struct Outcome {
    std::vector<uint8_t *> src, dst;  // dst points past the leading guard
    std::vector<size_t> dst_bytes;    // without guards
    std::vector<dp_status_t> status;
};

// One alltoallv with layout `l` on `team`: each member's source filled with
// its own bytes, its destination (with guards) with kUntouched.
Outcome run(Team &team, const VectorLayout &l, dp_dtype_t dtype, uint32_t seed) {
    const int p = team.size();
    const size_t e = dp_dtype_size(dtype);
    Outcome out;
    out.src.resize(p);
    out.dst.resize(p);
    out.dst_bytes.resize(p);
    std::mt19937 random(seed);
    for (int r = 0; r < p; ++r) {
        const size_t src_bytes = l.send_extent[r] * e;
        out.src[r] = team.buffer(r, src_bytes);
        for (size_t i = 0; i < src_bytes; ++i) out.src[r][i] = uint8_t(random());
        out.dst_bytes[r] = l.recv_extent[r] * e;
        uint8_t *whole = team.buffer(r, out.dst_bytes[r] + 2 * kGuard);
        std::memset(whole, kUntouched, out.dst_bytes[r] + 2 * kGuard);
        out.dst[r] = whole + kGuard;
    }
    out.status = team.run([&](int r, dp_request_t **q) {
        return dp_ialltoallv(out.src[r], l.scounts[r].data(), l.sdispls[r].data(), out.dst[r],
                             l.rcounts[r].data(), l.rdispls[r].data(), dtype, team[r].team, q);
    });
    return out;
}

// Every destination byte: a received block's bytes where one lands, else
// untouched (guards and gaps alike).
void expect_exact(const VectorLayout &l, const Outcome &run, dp_dtype_t dtype,
                  const std::string &where) {
    const int p = int(l.counts.size());
    const size_t e = dp_dtype_size(dtype);
    for (int r = 0; r < p; ++r) {
        std::vector<uint8_t> want(run.dst_bytes[r] + 2 * kGuard, kUntouched);
        for (int from = 0; from < p; ++from)
            std::memcpy(want.data() + kGuard + l.rdispls[r][from] * e,
                        run.src[from] + l.sdispls[from][r] * e, l.counts[from][r] * e);
        ASSERT_EQ(std::memcmp(run.dst[r] - kGuard, want.data(), want.size()), 0)
            << where << " rank " << r;
    }
}

void expect_untouched(const Outcome &run, const std::string &where) {
    for (size_t r = 0; r < run.dst.size(); ++r)
        for (size_t i = 0; i < run.dst_bytes[r] + 2 * kGuard; ++i)
            ASSERT_EQ((run.dst[r] - kGuard)[i], kUntouched)
                << where << " rank " << r << " byte " << i;
}

class AlltoallvTest : public ::testing::Test {
  protected:
    AgentProcess agent{{"--engines", "2"}};
    int next_key = 0;
    std::string key() { return "v" + std::to_string(next_key++); }
};

// members: every member waits from a thread of its own and the agent is
// stopped, so that only the members run the operations, from their copies
// of every member's counts block (client/rank_execution.h); ordinary
// memory stays the agent's.
void uneven_matrix(const AgentProcess &agent, const std::string &prefix, bool members = false) {
    int next_key = 0;
    uint32_t seed = 1;
    for (Memory memory : kAllMemory)
        for (int p : {1, 2, 3, 4}) {
            Team team(agent, p, prefix + std::to_string(next_key++), memory);
            if (members) team.wait_together();
            const deputy::testing::AgentPaused paused(agent, members && memory != Memory::direct);
            for (dp_dtype_t dtype : {DP_UINT8, DP_INT32, DP_FLOAT64})
                for (size_t max_count : {size_t(5), size_t(3000), size_t(200000)}) {
                    if (max_count > 5000 && dtype != DP_INT32) continue;
                    std::mt19937_64 random(seed);
                    // Member seed % (p + 1) sends nothing (none when it is p).
                    const VectorLayout l = deputy::test::make_vector_layout(
                        uint32_t(p), max_count, 7, seed % uint32_t(p + 1), random);
                    const std::string where = std::string(name(memory)) + " p " +
                                              std::to_string(p) + " " + dp_dtype_name(dtype) +
                                              " max " + std::to_string(max_count) + " seed " +
                                              std::to_string(seed);
                    const Outcome r = run(team, l, dtype, seed++);
                    for (int m = 0; m < p; ++m) ASSERT_EQ(r.status[m], DP_OK) << where;
                    expect_exact(l, r, dtype, where);
                }
        }
}

TEST_F(AlltoallvTest, UnevenCountsWithGapsAreBitExactInEveryMemoryMode) {
    uneven_matrix(agent, "u");
}

// The same with every operation on the engines in 4 KiB tasks: the result
// must not depend on how the plan is cut or who runs which chunk.
TEST(AlltoallvEngines, UnevenCountsInSmallChunksOnTwoEngines) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string config = dir + "/agent.json";
    {
        std::ofstream(config) << R"({"agent": {"engines": 2, "coll_chunk_bytes": 4096,
                                 "coll_direct_chunk_bytes": 4096, "coll_inline_bytes": 0}})";
    }
    AgentProcess agent({"--config", config});
    uneven_matrix(agent, "small");
    std::filesystem::remove_all(dir);
}

// Run by the members themselves: each plans from its copies of every
// member's counts block, the agent's plan, so the same bytes.
TEST_F(AlltoallvTest, UnevenCountsRunByTheMembersAreBitExact) {
    uneven_matrix(agent, "members", true);
    EXPECT_GT(deputy::testing::run_by_members(agent), 0u);
}

TEST_F(AlltoallvTest, CountsThatDisagreeFailEveryMemberAndWriteNothing) {
    for (Memory memory : kAllMemory) {
        SCOPED_TRACE(name(memory));
        Team team(agent, 3, key(), memory);
        std::mt19937_64 random(11);
        VectorLayout l = deputy::test::make_vector_layout(3, 100, 3, 3, random);
        // Rank 2 expects one element more from rank 0 than rank 0 sends.
        // (Its block moves past the end, so it overlaps no other.)
        l.rcounts[2][0] = l.counts[0][2] + 1;
        l.rdispls[2][0] = l.recv_extent[2];
        l.recv_extent[2] += l.rcounts[2][0];
        Outcome r = run(team, l, DP_INT32, 5);
        for (int m = 0; m < 3; ++m) EXPECT_EQ(r.status[m], DP_ERR_MISMATCH) << "rank " << m;
        expect_untouched(r, "mismatch");
        // The team goes on.
        const VectorLayout good = deputy::test::make_vector_layout(3, 100, 3, 3, random);
        const Outcome ok = run(team, good, DP_INT32, 6);
        for (int m = 0; m < 3; ++m) ASSERT_EQ(ok.status[m], DP_OK);
        expect_exact(good, ok, DP_INT32, "after the mismatch");
    }
}

TEST_F(AlltoallvTest, DtypesThatDisagreeAreAMismatch) {
    Team team(agent, 2, key());
    std::vector<uint8_t *> src(2), dst(2);
    for (int r = 0; r < 2; ++r) {
        src[r] = team.buffer(r, 64);
        dst[r] = team.buffer(r, 64);
        std::memset(dst[r], kUntouched, 64);
    }
    const size_t counts[2] = {4, 4}, displs[2] = {0, 4};
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_ialltoallv(src[r], counts, displs, dst[r], counts, displs,
                             r == 1 ? DP_UINT32 : DP_INT32, team[r].team, q);
    });
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(st[r], DP_ERR_MISMATCH);
        for (int i = 0; i < 64; ++i) ASSERT_EQ(dst[r][i], kUntouched);
    }
}

// A displacement that puts one block past the member's memory: refused on
// every member, nothing of anyone's destination written. Mapped: 64 MiB on
// (or further, out of the shared heap), past the 32 MiB pool. Direct: the block straddles the end of the
// member's registered range by 4 bytes, into memory of the same allocation
// that the test watches.
TEST_F(AlltoallvTest, ABlockBeyondTheMembersMemoryIsDeniedAndNothingIsWritten) {
    for (Memory memory : {Memory::mapped, Memory::direct}) {
        for (bool source : {false, true}) {
            SCOPED_TRACE(std::string(name(memory)) + (source ? " source" : " destination"));
            const int p = 3;
            Team team(agent, p, key(), memory);
            std::mt19937_64 random(21);
            VectorLayout l = deputy::test::make_vector_layout(p, 50, 2, 3, random);
            // Rank 1 sends rank 2 sixteen elements; that block is the one moved.
            l.counts[1][2] = l.scounts[1][2] = l.rcounts[2][1] = 16;
            l.sdispls[1][2] = l.send_extent[1];
            l.send_extent[1] += 16;
            l.rdispls[2][1] = l.recv_extent[2];
            l.recv_extent[2] += 16;
            Outcome r;
            r.src.resize(p);
            r.dst.resize(p);
            r.dst_bytes.resize(p);
            for (int m = 0; m < p; ++m) {
                r.src[m] = team.buffer(m, l.send_extent[m] * 4);
                r.dst_bytes[m] = l.recv_extent[m] * 4;
                uint8_t *whole = team.buffer(m, r.dst_bytes[m] + 2 * kGuard);
                std::memset(whole, kUntouched, r.dst_bytes[m] + 2 * kGuard);
                r.dst[m] = whole + kGuard;
            }
            const int victim = source ? 1 : 2;
            uint8_t *own = nullptr;
            constexpr size_t kTail = 256;  // past the registration, watched
            size_t registered = 0;
            if (memory == Memory::mapped) {
                // Past the pool, and not in the shared heap either (which the
                // kernel may have mapped right after the pool): memory the
                // agent does not reach for this member.
                const uint8_t *base = source ? r.src[1] : r.dst[2];
                size_t displ = (size_t(64) << 20) / 4;
                while (dp_mem_mapped(team[victim].ctx, base + displ * 4, 64))
                    displ += (size_t(64) << 20) / 4;
                if (source)
                    l.sdispls[1][2] = displ;
                else
                    l.rdispls[2][1] = displ;
            } else {
                // The victim's buffer again, registered but for a tail: its
                // block starts 60 bytes before the end of the registration.
                registered = source ? l.send_extent[1] * 4 : r.dst_bytes[2] + 2 * kGuard;
                own = static_cast<uint8_t *>(
                    aligned_alloc(64, (registered + kTail + 63) / 64 * 64));  // whole lines
                std::memset(own, kUntouched, registered + kTail);
                ASSERT_EQ(dp_mem_register(team[victim].ctx, own, registered), DP_OK);
                if (source) {
                    r.src[1] = own;
                    l.sdispls[1][2] = (registered - 60) / 4;
                } else {
                    r.dst[2] = own + kGuard;
                    l.rdispls[2][1] = (registered - kGuard - 60) / 4;
                }
            }
            r.status = team.run([&](int m, dp_request_t **q) {
                return dp_ialltoallv(r.src[m], l.scounts[m].data(), l.sdispls[m].data(), r.dst[m],
                                     l.rcounts[m].data(), l.rdispls[m].data(), DP_INT32,
                                     team[m].team, q);
            });
            for (int m = 0; m < p; ++m) EXPECT_EQ(r.status[m], DP_ERR_DENIED) << "rank " << m;
            expect_untouched(r, "denied");
            if (own) {
                for (size_t i = 0; i < kTail; ++i)
                    ASSERT_EQ(own[registered + i], kUntouched) << "byte " << i << " past it";
                EXPECT_EQ(dp_mem_deregister(team[victim].ctx, own), DP_OK);
                free(own);
            }
        }
    }
}

// Counts whose bytes pass 2^64 name no memory anyone owns: denied in every
// mode (staged posts them unstaged for the agent to refuse).
TEST_F(AlltoallvTest, ACountWhoseBytesOverflowIsDeniedInEveryMode) {
    for (Memory memory : kAllMemory) {
        SCOPED_TRACE(name(memory));
        Team team(agent, 2, key(), memory);
        std::vector<uint8_t *> src(2), dst(2);
        for (int r = 0; r < 2; ++r) {
            src[r] = team.buffer(r, 64);
            dst[r] = team.buffer(r, 64);
            std::memset(dst[r], kUntouched, 64);
        }
        const size_t huge = size_t(1) << 62;  // x 8 bytes
        // Rank 0 sends rank 1 `huge` elements, which rank 1 expects (after
        // its other block, so that the two do not overlap).
        const size_t sc[2][2] = {{1, huge}, {1, 1}}, rc[2][2] = {{1, 1}, {huge, 1}};
        const size_t displs[2][2] = {{0, 1}, {1, 0}};
        auto st = team.run([&](int r, dp_request_t **q) {
            return dp_ialltoallv(src[r], sc[r], displs[0], dst[r], rc[r], displs[r], DP_FLOAT64,
                                 team[r].team, q);
        });
        for (int r = 0; r < 2; ++r) {
            EXPECT_EQ(st[r], DP_ERR_DENIED) << "rank " << r;
            for (int i = 0; i < 64; ++i) ASSERT_EQ(dst[r][i], kUntouched) << "rank " << r;
        }
    }
}

TEST_F(AlltoallvTest, TheLibraryRefusesWhatItCanTellIsWrongBeforePosting) {
    Team team(agent, 2, key());
    uint8_t *src = team.buffer(0, 256), *dst = team.buffer(0, 256);
    const size_t c[2] = {4, 4}, d[2] = {0, 4}, overlapping[2] = {0, 3};
    dp_team_t *t = team[0].team;
    dp_request_t *req = reinterpret_cast<dp_request_t *>(&team);
    EXPECT_EQ(dp_ialltoallv(src, c, d, src, c, d, DP_INT32, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(dp_ialltoallv(src, nullptr, d, dst, c, d, DP_INT32, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_ialltoallv(src, c, d, dst, c, nullptr, DP_INT32, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_ialltoallv(nullptr, c, d, dst, c, d, DP_INT32, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_ialltoallv(src, c, d, nullptr, c, d, DP_INT32, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_ialltoallv(src, c, d, dst, c, d, DP_DTYPE_COUNT, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_ialltoallv(src, c, d, dst, c, overlapping, DP_INT32, t, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_ialltoallv(src, c, d, dst, c, d, DP_INT32, nullptr, &req), DP_ERR_INVALID);
    EXPECT_EQ(dp_ialltoallv(src, c, d, dst, c, d, DP_INT32, t, nullptr), DP_ERR_INVALID);
    EXPECT_EQ(dp_alltoallv(src, c, d, src, c, d, DP_INT32, t), DP_ERR_INVALID);
    // Nothing went out: the team's next alltoallv pairs up, with NULL
    // buffers where nothing moves (a member that neither sends nor receives).
    const size_t zero[2] = {0, 0};
    std::vector<uint8_t *> s(2), r(2);
    for (int m = 0; m < 2; ++m) s[m] = team.buffer(m, 64), r[m] = team.buffer(m, 64);
    for (int i = 0; i < 16; ++i) s[1][i] = uint8_t(i + 1);
    // Rank 1 sends rank 0 sixteen bytes; rank 0 sends nothing, rank 1 receives nothing.
    const size_t to_rank0[2] = {16, 0}, from_rank1[2] = {0, 16};
    auto st = team.run([&](int m, dp_request_t **q) {
        if (m == 0)
            return dp_ialltoallv(nullptr, zero, zero, r[0], from_rank1, zero, DP_UINT8,
                                 team[0].team, q);
        return dp_ialltoallv(s[1], to_rank0, zero, nullptr, zero, zero, DP_UINT8, team[1].team, q);
    });
    ASSERT_EQ(st[0], DP_OK);
    ASSERT_EQ(st[1], DP_OK);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(r[0][i], i + 1);
}

TEST_F(AlltoallvTest, BlockingFormAndTheCallersArraysAreReadDuringTheCall) {
    Team team(agent, 2, key(), Memory::direct);
    std::vector<uint8_t *> src(2), dst(2);
    for (int r = 0; r < 2; ++r) {
        src[r] = team.buffer(r, 64);
        dst[r] = team.buffer(r, 64);
        for (int i = 0; i < 64; ++i) src[r][i] = uint8_t(r * 100 + i), dst[r][i] = 0;
    }
    // Each member's arrays are overwritten right after its post returns.
    std::vector<std::vector<size_t>> counts(2, {8, 8}), displs(2, {0, 8});
    auto st = team.run([&](int r, dp_request_t **q) {
        dp_status_t s =
            dp_ialltoallv(src[r], counts[r].data(), displs[r].data(), dst[r], counts[r].data(),
                          displs[r].data(), DP_UINT8, team[r].team, q);
        counts[r] = {1000000, 1000000};
        displs[r] = {1u << 30, 1u << 30};
        return s;
    });
    for (int r = 0; r < 2; ++r) {
        ASSERT_EQ(st[r], DP_OK);
        for (int m = 0; m < 2; ++m)
            for (int i = 0; i < 8; ++i) EXPECT_EQ(dst[r][m * 8 + i], uint8_t(m * 100 + r * 8 + i));
    }
    // Blocking: rank 1 from a thread (rank 0's call returns only when both posted).
    const size_t c[2] = {4, 4}, d[2] = {8, 16};
    dp_status_t s1 = DP_ERR_INTERNAL;
    std::thread other(
        [&] { s1 = dp_alltoallv(src[1], c, d, dst[1], c, d, DP_UINT8, team[1].team); });
    EXPECT_EQ(dp_alltoallv(src[0], c, d, dst[0], c, d, DP_UINT8, team[0].team), DP_OK);
    other.join();
    EXPECT_EQ(s1, DP_OK);
    for (int r = 0; r < 2; ++r)
        for (int m = 0; m < 2; ++m)
            for (int i = 0; i < 4; ++i)
                EXPECT_EQ(dst[r][d[m] + i], uint8_t(m * 100 + d[r] + i)) << r << "," << m;
}

}  // namespace
