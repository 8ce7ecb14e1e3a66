// Teams across several agents ("simulated nodes"): `mpirun -np K deputy
// agent` on this machine, each agent with its own socket, members attached
// to different agents. Results are compared byte for byte with a reference
// reduced in rank order; values are chosen so that every order of the
// reduction gives the same bits (integers, and floats that are sums and
// products of small powers of two), since the agents combine nodes in the
// MPI library's order.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "agent_test_util.h"
#include "node_agents.h"
#include "coll/vector_layout.h"
#include "coll_table.h"
#include "coll_test_util.h"
#include "mover/names.h"

namespace {

using deputy::testing::eventually;
using deputy::testing::Memory;
using deputy::testing::reduce_ref;
using namespace deputy::testing;  // CollOp and expected_block
using deputy::testing::make_private_dir;
using deputy::testing::NodeAgents;
using deputy::testing::SpanningTeam;

// Values whose sums and products are exact in every order for any dtype.
void fill(uint8_t *p, size_t count, dp_dtype_t dt, uint32_t seed) {
    std::mt19937 rng(seed);
    const double values[] = {-2, -1, -0.5, 0.5, 1, 2};
    const double ints[] = {-3, -2, -1, 0, 1, 2, 3, 5};
    for (size_t i = 0; i < count; ++i) {
        if (deputy::mover::is_pair_dtype(unsigned(dt))) {  // ties on the value: the index decides
            set_pair(dt, p + i * dp_dtype_size(dt), int(ints[rng() % 8]), int(rng() % 8));
            continue;
        }
        switch (dt) {
            case DP_FLOAT32: reinterpret_cast<float *>(p)[i] = float(values[rng() % 6]); break;
            case DP_FLOAT64: reinterpret_cast<double *>(p)[i] = values[rng() % 6]; break;
            case DP_FLOAT16: {  // +-0.5, 1, 2 as IEEE half
                const uint16_t h[] = {0x3800, 0x3c00, 0x4000, 0xb800, 0xbc00, 0xc000};
                reinterpret_cast<uint16_t *>(p)[i] = h[rng() % 6];
                break;
            }
            case DP_BFLOAT16: {
                const uint16_t b[] = {0x3f00, 0x3f80, 0x4000, 0xbf00, 0xbf80, 0xc000};
                reinterpret_cast<uint16_t *>(p)[i] = b[rng() % 6];
                break;
            }
            default: {
                const size_t e = dp_dtype_size(dt);
                const int64_t v = int64_t(ints[rng() % 8]);
                const bool is_unsigned = dt == DP_UINT8 || dt == DP_UINT16 || dt == DP_UINT32 ||
                                         dt == DP_UINT64;
                const int64_t w = is_unsigned ? (v < 0 ? -v : v) : v;
                std::memcpy(p + i * e, &w, e);  // little endian: the low bytes
            }
        }
    }
}

class NodesTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (const std::string why = why_no_nodes(); !why.empty()) GTEST_SKIP() << why;
        agents_ = std::make_unique<NodeAgents>(3);
        ASSERT_TRUE(agents_->ready()) << "3 agents under mpirun did not come up";
    }
    std::unique_ptr<NodeAgents> agents_;
    int next_key_ = 0;
    std::string key() { return "n" + std::to_string(next_key_++); }
};

// Every operation x layouts (one rank per node, interleaved ranks, a node
// with most of the team) x counts 0, 1, 13, 4097 x memory modes x in place.
TEST_F(NodesTest, EveryOperationAcrossNodesBitExact) {
    const std::vector<std::vector<int>> layouts = {{0, 1}, {0, 1, 2, 0, 1}, {2, 2, 0, 2}};
    for (Memory memory : {Memory::mapped, Memory::direct, Memory::staged}) {
        for (const auto &layout : layouts) {
            SpanningTeam team(*agents_, layout, key(), memory);
            const int p = team.size();
            for (int r = 0; r < p; ++r) ASSERT_EQ(team.create_status(r), DP_OK);
            for (CollOp op : {kAllreduce, kReduceScatter, kAllgather, kAlltoall, kBcast, kBarrier}) {
                for (size_t count : {0ul, 1ul, 13ul, 4097ul}) {
                    for (bool in_place : {false, true}) {
                        if (in_place && (op == kReduceScatter || op == kBcast || op == kBarrier))
                            continue;
                        const size_t n = count * 4;
                        const size_t src_n = (op == kReduceScatter || op == kAlltoall) ? p * n : n;
                        const size_t dst_n = (op == kAllgather || op == kAlltoall) ? p * n : n;
                        std::vector<uint8_t *> src(p), dst(p);
                        std::vector<std::vector<uint8_t>> orig(p);
                        for (int r = 0; r < p; ++r) {
                            dst[r] = team.buffer(r, dst_n);
                            std::memset(dst[r], 0xcd, dst_n);
                            src[r] = in_place ? (op == kAllgather ? dst[r] + r * n : dst[r])
                                              : team.buffer(r, src_n);
                            fill(src[r], src_n / 4, DP_INT32, uint32_t(r * 31 + count + op));
                            orig[r].assign(src[r], src[r] + src_n);
                        }
                        const int root = p - 1;
                        auto st = team.run([&](int r, dp_request_t **q) {
                            dp_team_t *t = team.team(r);
                            switch (op) {
                                case kAllreduce: return dp_iallreduce(src[r], dst[r], count, DP_INT32, DP_SUM, t, q);
                                case kReduceScatter: return dp_ireduce_scatter(src[r], dst[r], count, DP_INT32, DP_SUM, t, q);
                                case kAllgather: return dp_iallgather(src[r], dst[r], count, DP_INT32, t, q);
                                case kAlltoall: return dp_ialltoall(src[r], dst[r], count, DP_INT32, t, q);
                                case kBcast: return dp_ibcast(r == root ? src[r] : dst[r], count, DP_INT32, root, t, q);
                                case kBarrier: return dp_ibarrier(t, q);
                            }
                            return DP_ERR_INTERNAL;
                        });
                        const std::string where = "op " + std::to_string(op) + " p " +
                                                  std::to_string(p) + " count " +
                                                  std::to_string(count) + " in_place " +
                                                  std::to_string(in_place) + " memory " +
                                                  deputy::testing::name(memory);
                        for (int r = 0; r < p; ++r) {
                            ASSERT_EQ(st[r], DP_OK) << where << " rank " << r;
                            if (n == 0 || op == kBarrier) continue;
                            const uint8_t *got = (op == kBcast && r == root) ? src[r] : dst[r];
                            const int blocks = (op == kAllgather || op == kAlltoall) ? p : 1;
                            for (int m = 0; m < blocks; ++m) {
                                const std::vector<uint8_t> want =
                                    expected_block(op, orig, r, m, count, root);
                                ASSERT_EQ(std::memcmp(got + m * n, want.data(), n), 0)
                                    << where << " rank " << r << " block " << m;
                            }
                        }
                    }
                }
            }
        }
    }
}

// Every collective of the one table across nodes, against the one
// reference (coll_table.h: reduce, gather, scatter, scan and exscan among
// them), over the layouts of the test above and the three memory modes.
TEST_F(NodesTest, EveryTableCollectiveAcrossNodesMatchesTheReference) {
    const std::vector<std::vector<int>> layouts = {{0, 1}, {0, 1, 2, 0, 1}, {2, 2, 0, 2}};
    for (Memory memory : {Memory::mapped, Memory::direct, Memory::staged}) {
        for (const auto &layout : layouts) {
            SpanningTeam team(*agents_, layout, key(), memory);
            for (int r = 0; r < team.size(); ++r) ASSERT_EQ(team.create_status(r), DP_OK);
            deputy::testing::check_table(
                team, [&](int r) { return team.team(r); },
                std::string("nodes ") + deputy::testing::name(memory) + " layout of " +
                    std::to_string(layout.size()));
        }
    }
}

// alltoallv across nodes: uneven blocks (zeros, a rank that sends nothing)
// in shuffled order with gaps, over the layouts of the test above and the
// three memory modes; every destination byte outside the received blocks
// (gaps, guards) unchanged.
TEST_F(NodesTest, AlltoallvUnevenAcrossNodesBitExact) {
    const std::vector<std::vector<int>> layouts = {{0, 1}, {0, 1, 2, 0, 1}, {2, 2, 0, 2}};
    constexpr size_t kGuard = 64;
    uint32_t seed = 1;
    for (Memory memory : {Memory::mapped, Memory::direct, Memory::staged}) {
        for (const auto &layout : layouts) {
            SpanningTeam team(*agents_, layout, key(), memory);
            const int p = team.size();
            for (int r = 0; r < p; ++r) ASSERT_EQ(team.create_status(r), DP_OK);
            for (size_t max_count : {size_t(3), size_t(5000), size_t(300000)}) {
                std::mt19937_64 random(seed);
                const auto l = deputy::test::make_vector_layout(uint32_t(p), max_count, 5,
                                                                seed % uint32_t(p + 1), random);
                const std::string where = std::string(deputy::testing::name(memory)) + " p " +
                                          std::to_string(p) + " max " +
                                          std::to_string(max_count) + " seed " +
                                          std::to_string(seed);
                ++seed;
                std::vector<uint8_t *> src(p), dst(p);
                for (int r = 0; r < p; ++r) {
                    src[r] = team.buffer(r, l.send_extent[r] * 4);
                    fill(src[r], l.send_extent[r], DP_INT32, seed * 7 + uint32_t(r));
                    dst[r] = team.buffer(r, l.recv_extent[r] * 4 + 2 * kGuard) + kGuard;
                    std::memset(dst[r] - kGuard, 0xC3, l.recv_extent[r] * 4 + 2 * kGuard);
                }
                auto st = team.run([&](int r, dp_request_t **q) {
                    return dp_ialltoallv(src[r], l.scounts[r].data(), l.sdispls[r].data(), dst[r],
                                         l.rcounts[r].data(), l.rdispls[r].data(), DP_INT32,
                                         team.team(r), q);
                });
                for (int r = 0; r < p; ++r) {
                    ASSERT_EQ(st[r], DP_OK) << where << " rank " << r;
                    std::vector<uint8_t> want(l.recv_extent[r] * 4 + 2 * kGuard, 0xC3);
                    for (int from = 0; from < p; ++from)
                        std::memcpy(want.data() + kGuard + l.rdispls[r][from] * 4,
                                    src[from] + l.sdispls[from][r] * 4, l.counts[from][r] * 4);
                    ASSERT_EQ(std::memcmp(dst[r] - kGuard, want.data(), want.size()), 0)
                        << where << " rank " << r;
                }
            }
        }
    }
}

// Counts that disagree across nodes are seen only by the receiving node
// (the sender's counts are elsewhere); every rank on every node still gets
// DP_ERR_MISMATCH, nothing is written, and the team goes on.
// reduce_scatterv across nodes: uneven counts (one 0, one of several
// stage pieces), every result the rank-order reduction; then counts that
// differ only between nodes (each node's members agree among themselves)
// fail every rank and write nothing: the agents compare a digest of the
// counts before their first step.
TEST_F(NodesTest, ReduceScattervWithUnevenCountsAcrossNodes) {
    SpanningTeam team(*agents_, {0, 1, 2, 1}, key());
    const int p = team.size();
    const std::vector<size_t> counts = {1000, 0, (1u << 20) + 3, 7};
    size_t total = 0;
    for (size_t c : counts) total += c;
    std::vector<uint8_t *> src(p), dst(p);
    for (int r = 0; r < p; ++r) {
        src[size_t(r)] = team.buffer(r, total * 4);
        fill(src[size_t(r)], total, DP_INT32, uint32_t(r + 11));
        dst[size_t(r)] = team.buffer(r, counts[size_t(r)] * 4 + 64);
        std::memset(dst[size_t(r)], 0xC3, counts[size_t(r)] * 4 + 64);
    }
    auto run = [&](const std::vector<size_t> &of1) {
        return team.run([&](int r, dp_request_t **q) {
            const std::vector<size_t> &mine = r == 1 || r == 3 ? of1 : counts;
            return dp_ireduce_scatterv(src[size_t(r)], dst[size_t(r)], mine.data(), DP_INT32,
                                       DP_SUM, team.team(r), q);
        });
    };
    auto st = run(counts);
    size_t at = 0;
    for (int r = 0; r < p; ++r) {
        ASSERT_EQ(st[size_t(r)], DP_OK) << "rank " << r;
        std::vector<const uint8_t *> blocks;
        for (int m = 0; m < p; ++m) blocks.push_back(src[size_t(m)] + at * 4);
        if (counts[size_t(r)]) {
            const auto want = reduce_ref(blocks, counts[size_t(r)], DP_INT32, DP_SUM);
            ASSERT_EQ(std::memcmp(dst[size_t(r)], want.data(), want.size()), 0) << "rank " << r;
        }
        for (size_t i = counts[size_t(r)] * 4; i < counts[size_t(r)] * 4 + 64; ++i)
            ASSERT_EQ(dst[size_t(r)][i], 0xC3) << "rank " << r << " byte " << i;
        at += counts[size_t(r)];
    }
    // Node 1's two members (ranks 1 and 3) agree with each other that
    // block 0 is one element shorter, and block 2 one longer.
    std::vector<size_t> other = counts;
    other[0] -= 1;
    other[2] += 1;
    for (int r = 0; r < p; ++r) std::memset(dst[size_t(r)], 0xC3, counts[size_t(r)] * 4 + 64);
    st = run(other);
    for (int r = 0; r < p; ++r) {
        EXPECT_EQ(st[size_t(r)], DP_ERR_MISMATCH) << "rank " << r;
        for (size_t i = 0; i < counts[size_t(r)] * 4 + 64; ++i)
            ASSERT_EQ(dst[size_t(r)][i], 0xC3) << "rank " << r << " byte " << i;
    }
}

TEST_F(NodesTest, AlltoallvCountsThatDisagreeAcrossNodesFailEveryRank) {
    SpanningTeam team(*agents_, {0, 1, 1}, key());
    std::vector<uint8_t *> src(3), dst(3);
    for (int r = 0; r < 3; ++r) {
        src[r] = team.buffer(r, 256);
        dst[r] = team.buffer(r, 256);
        for (int i = 0; i < 256; ++i) src[r][i] = uint8_t(r * 50 + i);
        std::memset(dst[r], 0xC3, 256);
    }
    // Everyone sends 8 bytes to everyone at 8 m; rank 1 (node 1) expects 9
    // from rank 0 (node 0).
    std::vector<std::vector<size_t>> counts(3, {8, 8, 8});
    const std::vector<size_t> displs = {0, 8, 16}, rdispls1 = {32, 8, 16};
    counts[1][0] = 9;  // rank 1's rcounts[0]
    auto st = team.run([&](int r, dp_request_t **q) {
        const std::vector<size_t> sc = {8, 8, 8};
        return dp_ialltoallv(src[r], sc.data(), displs.data(), dst[r], counts[r].data(),
                             r == 1 ? rdispls1.data() : displs.data(), DP_UINT8, team.team(r), q);
    });
    for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(st[r], DP_ERR_MISMATCH) << "rank " << r;
        for (int i = 0; i < 256; ++i) ASSERT_EQ(dst[r][i], 0xC3) << "rank " << r << " byte " << i;
    }
    // The team goes on: the same with agreeing counts.
    counts[1][0] = 8;
    st = team.run([&](int r, dp_request_t **q) {
        const std::vector<size_t> sc = {8, 8, 8};
        return dp_ialltoallv(src[r], sc.data(), displs.data(), dst[r], counts[r].data(),
                             displs.data(), DP_UINT8, team.team(r), q);
    });
    for (int r = 0; r < 3; ++r) {
        ASSERT_EQ(st[r], DP_OK) << "rank " << r;
        for (int m = 0; m < 3; ++m)
            for (int i = 0; i < 8; ++i)
                ASSERT_EQ(dst[r][m * 8 + i], uint8_t(m * 50 + r * 8 + i)) << r << "," << m;
    }
    // A block beyond a member's memory on node 1 fails every rank too, and
    // nothing is written anywhere.
    for (int r = 0; r < 3; ++r) std::memset(dst[r], 0xC3, 256);
    const std::vector<size_t> far = {0, 8, size_t(1) << 40};
    st = team.run([&](int r, dp_request_t **q) {
        const std::vector<size_t> sc = {8, 8, 8};
        return dp_ialltoallv(src[r], sc.data(), displs.data(), dst[r], sc.data(),
                             r == 2 ? far.data() : displs.data(), DP_UINT8, team.team(r), q);
    });
    // Node 1's ranks are refused; node 0 learns only that node 1 differs.
    EXPECT_EQ(st[0], DP_ERR_MISMATCH);
    EXPECT_EQ(st[1], DP_ERR_DENIED);
    EXPECT_EQ(st[2], DP_ERR_DENIED);
    for (int r = 0; r < 3; ++r) {
        for (int i = 0; i < 256; ++i) ASSERT_EQ(dst[r][i], 0xC3) << "rank " << r << " byte " << i;
    }
}

TEST_F(NodesTest, AllreduceEveryDtypeAndOpAndALargeCountAcrossNodes) {
    SpanningTeam team(*agents_, {1, 0, 2, 1}, key());
    const int p = team.size();
    for (int dti = 0; dti < DP_DTYPE_COUNT; ++dti) {
        for (int opi = 0; opi < DP_OP_COUNT; ++opi) {
            if (!deputy::mover::op_applies(unsigned(dti), unsigned(opi))) continue;
            const auto dt = dp_dtype_t(dti);
            const auto op = dp_op_t(opi);
            // 1 Mi + 1 once (several 4 MiB chunks in flight), 1001 otherwise.
            const size_t count = (dti == DP_INT32 && opi == DP_SUM) ? (1u << 20) + 1 : 1001;
            const size_t n = count * dp_dtype_size(dt);
            std::vector<uint8_t *> src(p), dst(p);
            for (int r = 0; r < p; ++r) {
                src[r] = team.buffer(r, n);
                dst[r] = team.buffer(r, n);
                fill(src[r], count, dt, uint32_t(r * 131 + dti * 7 + opi));
            }
            auto st = team.run([&](int r, dp_request_t **q) {
                return dp_iallreduce(src[r], dst[r], count, dt, op, team.team(r), q);
            });
            auto ref = reduce_ref({src.begin(), src.end()}, count, dt, op);
            for (int r = 0; r < p; ++r) {
                ASSERT_EQ(st[r], DP_OK) << dp_dtype_name(dt) << " " << dp_op_name(op);
                ASSERT_EQ(std::memcmp(dst[r], ref.data(), n), 0)
                    << "rank " << r << " " << dp_dtype_name(dt) << " " << dp_op_name(op);
            }
        }
    }
}

TEST_F(NodesTest, SixteenOutstandingAcrossNodesCompleteInOrder) {
    SpanningTeam team(*agents_, {0, 1, 2}, key());
    const int kOps = 16, p = 3;
    const size_t count = 50000;  // 200 KB each
    std::vector<std::vector<int32_t *>> buf(kOps, std::vector<int32_t *>(p));
    std::vector<std::vector<dp_request_t *>> reqs(kOps, std::vector<dp_request_t *>(p));
    for (int k = 0; k < kOps; ++k)
        for (int r = 0; r < p; ++r) {
            buf[k][r] = reinterpret_cast<int32_t *>(team.buffer(r, count * 4));
            for (size_t i = 0; i < count; ++i) buf[k][r][i] = int32_t(k * 1000 + r + i % 7);
        }
    for (int k = 0; k < kOps; ++k)
        for (int r = 0; r < p; ++r)
            ASSERT_EQ(dp_iallreduce(buf[k][r], buf[k][r], count, DP_INT32, DP_SUM, team.team(r),
                                    &reqs[k][r]),
                      DP_OK);
    for (int r = 0; r < p; ++r) {
        ASSERT_EQ(dp_wait(reqs[kOps - 1][r]), DP_OK);
        // Posting order: once the last is done, every earlier one is too.
        for (int k = 0; k < kOps; ++k) {
            int done = 0;
            EXPECT_EQ(dp_test(reqs[k][r], &done), DP_OK);
            EXPECT_EQ(done, 1) << "op " << k << " rank " << r;
        }
    }
    for (int k = 0; k < kOps; ++k)
        for (int r = 0; r < p; ++r) {
            for (size_t i = 0; i < count; i += 997)
                ASSERT_EQ(buf[k][r][i], int32_t(3 * k * 1000 + 3 + 3 * (i % 7))) << k << "," << r;
            dp_request_free(reqs[k][r]);
        }
}

TEST_F(NodesTest, MismatchOnAnotherNodeFailsEveryRankAndTheTeamGoesOn) {
    SpanningTeam team(*agents_, {0, 1, 1}, key());
    std::vector<uint8_t *> buf(3);
    for (int r = 0; r < 3; ++r) buf[r] = team.buffer(r, 4096);
    // Rank 0 (alone on node 0) disagrees with node 1, whose ranks agree.
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(buf[r], buf[r], r == 0 ? 100 : 101, DP_INT32, DP_SUM, team.team(r), q);
    });
    for (auto s : st) EXPECT_EQ(s, DP_ERR_MISMATCH);
    // Node 1's own ranks disagree: node 0 must fail too, not wait.
    st = team.run([&](int r, dp_request_t **q) {
        return dp_ibcast(buf[r], 10, DP_INT32, r == 2 ? 2 : 0, team.team(r), q);
    });
    for (auto s : st) EXPECT_EQ(s, DP_ERR_MISMATCH);
    st = team.run([&](int r, dp_request_t **q) {
        for (int i = 0; i < 10; ++i) reinterpret_cast<int32_t *>(buf[r])[i] = r + 1;
        return dp_iallreduce(buf[r], buf[r], 10, DP_INT32, DP_SUM, team.team(r), q);
    });
    for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(st[r], DP_OK);
        EXPECT_EQ(reinterpret_cast<int32_t *>(buf[r])[9], 6);
    }
}

// Members that leave as soon as their own operation completed (a program's
// MPI_Comm_dup / MPI_Allreduce / MPI_Comm_free, round after round) must not
// fail that operation for the members on other nodes, whose agents may
// still be finishing it; what is posted after a leave fails.
TEST_F(NodesTest, MembersThatLeaveRightAfterTheirLastOperationDoNotFailTheOthers) {
    const std::vector<int> node_of = {0, 0, 1, 2};
    const int p = int(node_of.size());
    std::vector<std::string> sockets;
    std::vector<dp_context_t *> ctx(size_t(p), nullptr);
    for (int r = 0; r < p; ++r) sockets.push_back(agents_->socket(node_of[size_t(r)]));
    for (int r = 0; r < p; ++r) {
        dp_config_t c = DP_CONFIG_INITIALIZER;
        c.job_secret = deputy::testing::kTestJobSecret;
        c.agent = sockets[size_t(r)].c_str();
        c.pool_bytes = 8 << 20;
        ASSERT_EQ(dp_init(&c, &ctx[size_t(r)]), DP_OK);
    }
    for (size_t count : {size_t(1), size_t(4097), size_t(1) << 18})
        for (int round = 0; round < 12; ++round) {
            const std::string k = key();
            std::vector<std::string> failures{size_t(p)};
            std::vector<std::thread> ranks;
            for (int r = 0; r < p; ++r)
                ranks.emplace_back([&, r] {
                    std::string &f = failures[size_t(r)];
                    dp_team_t *team = nullptr;
                    if (dp_team_create(ctx[size_t(r)], k.c_str(), r, p, &team) != DP_OK) {
                        f = "team_create failed";
                        return;
                    }
                    auto *buf = static_cast<int64_t *>(dp_malloc(ctx[size_t(r)], count * 8));
                    for (size_t i = 0; i < count; ++i) buf[i] = int64_t(round * 1000 + r + i);
                    dp_request_t *req = nullptr;
                    dp_status_t st = dp_iallreduce(buf, buf, count, DP_INT64, DP_SUM, team, &req);
                    if (st == DP_OK) st = dp_wait(req);
                    dp_team_destroy(team);  // at once, as MPI_Comm_free does
                    if (st != DP_OK) f = std::string("allreduce: ") + dp_status_name(st);
                    for (size_t i = 0; f.empty() && i < count; ++i)
                        if (buf[i] != int64_t(4 * (round * 1000 + i) + 6))
                            f = "element " + std::to_string(i) + " differs";
                    if (req) dp_request_free(req);
                    dp_free(ctx[size_t(r)], buf);
                });
            for (auto &t : ranks) t.join();
            for (int r = 0; r < p; ++r)
                EXPECT_EQ(failures[size_t(r)], "")
                    << "count " << count << " round " << round << " rank " << r;
        }
    for (auto *c : ctx) dp_finalize(c);
}

TEST_F(NodesTest, TeamMissingAMemberTimesOutOnEveryNode) {
    // Ranks 0 and 1 of 3 join from nodes 0 and 2; rank 2 never does.
    std::vector<dp_context_t *> ctx(2);
    std::vector<dp_team_t *> teams(2, nullptr);
    std::vector<dp_status_t> st(2);
    const std::string k = key();
    const std::string s0 = agents_->socket(0), s2 = agents_->socket(2);
    for (int r = 0; r < 2; ++r) {
        dp_config_t c = DP_CONFIG_INITIALIZER;
        c.job_secret = deputy::testing::kTestJobSecret;
        c.agent = r == 0 ? s0.c_str() : s2.c_str();
        ASSERT_EQ(dp_init(&c, &ctx[r]), DP_OK);
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> joiners;
    for (int r = 0; r < 2; ++r)
        joiners.emplace_back([&, r] {
            st[r] = dp_team_create_timeout(ctx[r], k.c_str(), r, 3, 400, &teams[r]);
        });
    for (auto &t : joiners) t.join();
    const auto waited = std::chrono::steady_clock::now() - start;
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(st[r], DP_ERR_TIMEOUT);
        EXPECT_EQ(teams[r], nullptr);
        dp_finalize(ctx[r]);
    }
    EXPECT_LT(waited, std::chrono::seconds(4));
}

TEST_F(NodesTest, MemberThatDiesOnOneNodeFailsTheOthersWithinTheBound) {
    const std::string k = key();
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t child = fork();
    if (child == 0) {  // rank 1 on node 1: joins, then hangs until killed
        deputy::testing::NodeMember m;
        if (deputy::testing::join_on_node(*agents_, 1, k, 1, 2, &m) != DP_OK) _exit(1);
        [[maybe_unused]] ssize_t n = write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    deputy::testing::NodeMember me;
    ASSERT_EQ(deputy::testing::join_on_node(*agents_, 0, k, 0, 2, &me), DP_OK);
    dp_context_t *ctx = me.ctx;
    dp_team_t *team = me.team;
    char x;
    ASSERT_EQ(read(ready[0], &x, 1), 1);
    close(ready[0]);
    auto *buf = static_cast<int32_t *>(dp_malloc(ctx, 4096));
    dp_request_t *req = nullptr;
    ASSERT_EQ(dp_iallreduce(buf, buf, 1024, DP_INT32, DP_SUM, team, &req), DP_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto start = std::chrono::steady_clock::now();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(dp_wait(req), DP_ERR_AGENT_LOST);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    dp_request_free(req);
    // The broken team refuses new work at once; the agents serve new teams.
    ASSERT_EQ(dp_iallreduce(buf, buf, 1024, DP_INT32, DP_SUM, team, &req), DP_OK);
    EXPECT_EQ(dp_wait(req), DP_ERR_AGENT_LOST);
    dp_request_free(req);
    dp_free(ctx, buf);
    dp_team_destroy(team);
    dp_finalize(ctx);
    SpanningTeam fresh(*agents_, {0, 1}, key());
    std::vector<uint8_t *> b(2);
    for (int r = 0; r < 2; ++r) b[r] = fresh.buffer(r, 64);
    auto st = fresh.run([&](int r, dp_request_t **q) { return dp_iallreduce(b[r], b[r], 4, DP_INT32, DP_SUM, fresh.team(r), q); });
    for (auto s : st) EXPECT_EQ(s, DP_OK);
}

std::string run_command(const std::string &cmd) {
    std::string out;
    if (FILE *f = popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
        pclose(f);
    }
    return out;
}

// --inter: the allreduce among the agents as a src/coll schedule over MPI
// point-to-point (or MPI's own); results bit-exact, and `deputy info`
// names the algorithm that ran.
TEST_F(NodesTest, InterNodeAlgorithmsAreSelectableAndReported) {
    agents_.reset();  // this test starts its own agents per algorithm
    for (const char *inter : {"ring", "rd", "rabenseifner", "native"}) {
        SCOPED_TRACE(inter);
        NodeAgents agents(3, {"--inter", inter});
        ASSERT_TRUE(agents.ready());
        SpanningTeam team(agents, {0, 1, 2, 0, 1}, key());
        const int p = team.size();
        for (size_t count : {700ul, 65537ul, (1ul << 20) + 3}) {  // past the inline size
            for (dp_dtype_t dt : {DP_INT32, DP_FLOAT64, DP_BFLOAT16}) {
                const size_t n = count * dp_dtype_size(dt);
                std::vector<uint8_t *> src(p), dst(p);
                for (int r = 0; r < p; ++r) {
                    src[r] = team.buffer(r, n);
                    dst[r] = team.buffer(r, n);
                    fill(src[r], count, dt, uint32_t(r * 17 + count + dt));
                }
                auto st = team.run([&](int r, dp_request_t **q) {
                    return dp_iallreduce(src[r], dst[r], count, dt, DP_SUM, team.team(r), q);
                });
                auto ref = reduce_ref({src.begin(), src.end()}, count, dt, DP_SUM);
                for (int r = 0; r < p; ++r) {
                    ASSERT_EQ(st[r], DP_OK) << count << " " << dp_dtype_name(dt);
                    ASSERT_EQ(std::memcmp(dst[r], ref.data(), n), 0)
                        << "rank " << r << " count " << count << " " << dp_dtype_name(dt);
                }
                // A reduce to a rank of node 1: MPI_Ireduce between the
                // agents, or the same schedule as the allreduce's.
                const int root = p - 1;
                std::memset(dst[root], 0, n);
                st = team.run([&](int r, dp_request_t **q) {
                    return dp_ireduce(src[r], r == root ? dst[r] : nullptr, count, dt, DP_SUM, root,
                                      team.team(r), q);
                });
                for (int r = 0; r < p; ++r) ASSERT_EQ(st[r], DP_OK) << "reduce " << count;
                ASSERT_EQ(std::memcmp(dst[root], ref.data(), n), 0)
                    << "reduce, count " << count << " " << dp_dtype_name(dt);
            }
        }
        const std::string info = run_command(target_shell(
            std::string(DEPUTY_BIN) + " info --format json --socket " + agents.socket(1)));
        const std::string want = std::string("\"") +
                                 (std::string(inter) == "rd" ? "recursive_doubling"
                                  : std::string(inter) == "native" ? "mpi-native"
                                                                   : inter) +
                                 "\":";
        EXPECT_NE(info.find(want), std::string::npos) << info;
    }
}

TEST(NodesConfig, UnknownInterAlgorithmIsRefusedNamingTheChoices) {
    const std::string out =
        run_command(target_shell(std::string(DEPUTY_BIN) + " agent --inter bogus 2>&1"));
    EXPECT_NE(out.find("--inter bogus: not one of auto, native, ring, recursive_doubling (rd), "
                       "rabenseifner"),
              std::string::npos)
        << out;
}

// An agent killed in the middle of a stream of collectives: its clients
// and the other nodes' clients all get DP_ERR_AGENT_LOST within the bound
// (node_timeout_ms = 2 s here), and the surviving agents serve new teams.
TEST_F(NodesTest, AgentKilledMidStreamFailsEveryNodeWithinTheBoundAndSurvivorsServe) {
    SpanningTeam team(*agents_, {0, 1, 2}, key());
    const size_t count = 1 << 18;  // 1 MiB of int32
    std::vector<uint8_t *> buf(3);
    for (int r = 0; r < 3; ++r) buf[r] = team.buffer(r, count * 4);
    const pid_t victim = agents_->agent_pid(2);
    ASSERT_GT(victim, 0);
    std::chrono::steady_clock::time_point killed{};
    std::vector<dp_status_t> last(3, DP_OK);
    for (int round = 0; round < 400 && last[0] == DP_OK; ++round) {
        if (round == 5) {
            kill(victim, SIGKILL);
            killed = std::chrono::steady_clock::now();
        }
        // A member whose agent is already gone fails at post instead.
        std::vector<dp_request_t *> reqs(3, nullptr);
        for (int r = 0; r < 3; ++r)
            last[r] = dp_iallreduce(buf[r], buf[r], count, DP_INT32, DP_MAX, team.team(r), &reqs[r]);
        for (int r = 0; r < 3; ++r)
            if (reqs[r]) {
                last[r] = dp_wait(reqs[r]);
                dp_request_free(reqs[r]);
            }
    }
    ASSERT_NE(killed, std::chrono::steady_clock::time_point{});
    const auto took = std::chrono::steady_clock::now() - killed;
    for (int r = 0; r < 3; ++r) EXPECT_EQ(last[r], DP_ERR_AGENT_LOST) << "rank " << r;
    EXPECT_LT(took, std::chrono::seconds(8)) << "bound: node_timeout_ms 2000 + slack";
    SpanningTeam fresh(*agents_, {1, 0, 1}, key());
    std::vector<uint8_t *> b(3);
    for (int r = 0; r < 3; ++r) {
        ASSERT_EQ(fresh.create_status(r), DP_OK);
        b[r] = fresh.buffer(r, 64);
        reinterpret_cast<int32_t *>(b[r])[0] = r + 1;
    }
    auto st = fresh.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(b[r], b[r], 1, DP_INT32, DP_SUM, fresh.team(r), q);
    });
    for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(st[r], DP_OK);
        EXPECT_EQ(reinterpret_cast<int32_t *>(b[r])[0], 6);
    }
}

}  // namespace
