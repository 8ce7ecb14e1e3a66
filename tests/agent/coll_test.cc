// Collectives run by a real agent for teams of clients. Each member is its
// own dp_init context (a separate client of the agent; the agent cannot
// tell them from separate processes), posting non-blocking operations from
// one thread so a whole team fits in one test. Results are compared
// byte for byte with a reference reduced in the same (rank) order with the
// mover's scalar-checked kernels.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <semaphore>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "channel/team_board.h"
#include "client/context.h"
#include "client/team.h"
#include "coll_test_util.h"
#include "mover/names.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::fill;
using deputy::testing::Team;
using deputy::testing::kAllMemory;
using deputy::testing::Memory;
using deputy::testing::name;
using deputy::testing::reduce_ref;
using deputy::testing::CollOp;
using deputy::testing::expected_block;
using deputy::testing::kAllgather;
using deputy::testing::kAllreduce;
using deputy::testing::kAlltoall;
using deputy::testing::kBcast;
using deputy::testing::kReduceScatter;

class CollTest : public ::testing::Test {
  protected:
    AgentProcess agent{{"--engines", "2"}};
    int next_key = 0;
    std::string key() { return "t" + std::to_string(next_key++); }
};

TEST_F(CollTest, AllreduceEveryDtypeAndOpAcrossTeamSizes) {
    for (int p : {1, 2, 3, 5, 8}) {
        Team team(agent, p, key());
        for (int dti = 0; dti < DP_DTYPE_COUNT; ++dti) {
            for (int opi = 0; opi < DP_OP_COUNT; ++opi) {
                if (!deputy::mover::op_applies(unsigned(dti), unsigned(opi))) continue;
                const auto dt = dp_dtype_t(dti);
                const auto op = dp_op_t(opi);
                const size_t count = 1001;  // odd, not a multiple of any team size here
                const size_t n = count * dp_dtype_size(dt);
                std::vector<uint8_t *> src(p), dst(p);
                for (int r = 0; r < p; ++r) {
                    src[r] = team.buffer(r, n);
                    dst[r] = team.buffer(r, n);
                    fill(src[r], n, uint32_t(r * 131 + dti * 7 + opi), dt);
                }
                auto st = team.run([&](int r, dp_request_t **q) {
                    return dp_iallreduce(src[r], dst[r], count, dt, op, team[r].team, q);
                });
                auto ref = reduce_ref({src.begin(), src.end()}, count, dt, op);
                for (int r = 0; r < p; ++r) {
                    ASSERT_EQ(st[r], DP_OK) << "p=" << p << " " << dp_dtype_name(dt);
                    ASSERT_EQ(std::memcmp(dst[r], ref.data(), n), 0)
                        << "p=" << p << " rank " << r << " " << dp_dtype_name(dt) << " "
                        << dp_op_name(op);
                }
                for (int r = 0; r < p; ++r) dp_free(team[r].ctx, src[r]), dp_free(team[r].ctx, dst[r]);
            }
        }
    }
}

TEST_F(CollTest, AllreduceSizesInPlaceInEveryMemoryMode) {
    for (Memory memory : kAllMemory) {
        Team team(agent, 3, key(), memory);
        for (size_t count : {0ul, 1ul, 7ul, 65536ul, 300001ul}) {
            for (bool in_place : {false, true}) {
                const size_t n = count * 4;
                std::vector<uint8_t *> src(3), dst(3);
                std::vector<std::vector<uint8_t>> orig(3);
                for (int r = 0; r < 3; ++r) {
                    src[r] = team.buffer(r, n);
                    fill(src[r], n, uint32_t(r + count), DP_INT32);
                    orig[r].assign(src[r], src[r] + n);
                    dst[r] = in_place ? src[r] : team.buffer(r, n);
                }
                auto st = team.run([&](int r, dp_request_t **q) {
                    return dp_iallreduce(src[r], dst[r], count, DP_INT32, DP_SUM, team[r].team, q);
                });
                std::vector<const uint8_t *> o = {orig[0].data(), orig[1].data(), orig[2].data()};
                auto ref = count ? reduce_ref(o, count, DP_INT32, DP_SUM) : std::vector<uint8_t>();
                for (int r = 0; r < 3; ++r) {
                    ASSERT_EQ(st[r], DP_OK);
                    if (n) {  // memcmp with a null pointer is undefined even for 0 bytes
                        ASSERT_EQ(std::memcmp(dst[r], ref.data(), n), 0)
                            << "count " << count << " in_place " << in_place << " " << name(memory);
                    }
                }
            }
        }
    }
}

TEST_F(CollTest, ReduceScatterAllgatherAlltoallBcastBarrier) {
    for (Memory memory : kAllMemory) {
        SCOPED_TRACE(name(memory));
        const int p = 4;
        Team team(agent, p, key(), memory);
        const size_t count = 999;
        const size_t n = count * 8;
        std::vector<uint8_t *> src(p), dst(p);
        for (int r = 0; r < p; ++r) {
            src[r] = team.buffer(r, p * n);
            dst[r] = team.buffer(r, p * n);
            fill(src[r], p * n, uint32_t(100 + r), DP_FLOAT64);
        }
        // reduce_scatter: rank r gets block r reduced.
        auto st = team.run([&](int r, dp_request_t **q) {
            return dp_ireduce_scatter(src[r], dst[r], count, DP_FLOAT64, DP_SUM, team[r].team, q);
        });
        for (int r = 0; r < p; ++r) {
            ASSERT_EQ(st[r], DP_OK);
            std::vector<const uint8_t *> blocks;
            for (int m = 0; m < p; ++m) blocks.push_back(src[m] + r * n);
            auto ref = reduce_ref(blocks, count, DP_FLOAT64, DP_SUM);
            ASSERT_EQ(std::memcmp(dst[r], ref.data(), n), 0) << "reduce_scatter rank " << r;
        }
        // allgather: dst block m = src of m.
        st = team.run([&](int r, dp_request_t **q) {
            return dp_iallgather(src[r], dst[r], count, DP_FLOAT64, team[r].team, q);
        });
        for (int r = 0; r < p; ++r)
            for (int m = 0; m < p; ++m)
                ASSERT_EQ(std::memcmp(dst[r] + m * n, src[m], n), 0) << "allgather " << r << "," << m;
        // alltoall: dst block m of r = src block r of m.
        st = team.run([&](int r, dp_request_t **q) {
            return dp_ialltoall(src[r], dst[r], count, DP_FLOAT64, team[r].team, q);
        });
        for (int r = 0; r < p; ++r)
            for (int m = 0; m < p; ++m)
                ASSERT_EQ(std::memcmp(dst[r] + m * n, src[m] + r * n, n), 0)
                    << "alltoall " << r << "," << m;
        // alltoall in place.
        std::vector<std::vector<uint8_t>> before(p);
        for (int r = 0; r < p; ++r) before[r].assign(src[r], src[r] + p * n);
        st = team.run([&](int r, dp_request_t **q) {
            return dp_ialltoall(src[r], src[r], count, DP_FLOAT64, team[r].team, q);
        });
        for (int r = 0; r < p; ++r)
            for (int m = 0; m < p; ++m)
                ASSERT_EQ(std::memcmp(src[r] + m * n, before[m].data() + r * n, n), 0)
                    << "in-place alltoall " << r << "," << m;
        // bcast from every root.
        for (int root = 0; root < p; ++root) {
            for (int r = 0; r < p; ++r) fill(dst[r], n, uint32_t(root * 10 + r), DP_UINT8);
            std::vector<uint8_t> want(dst[root], dst[root] + n);
            st = team.run([&](int r, dp_request_t **q) {
                return dp_ibcast(dst[r], count, DP_FLOAT64, root, team[r].team, q);
            });
            for (int r = 0; r < p; ++r) {
                ASSERT_EQ(st[r], DP_OK);
                ASSERT_EQ(std::memcmp(dst[r], want.data(), n), 0) << "bcast root " << root;
            }
        }
        st = team.run([&](int r, dp_request_t **q) { return dp_ibarrier(team[r].team, q); });
        for (auto s : st) ASSERT_EQ(s, DP_OK);
    }
}

// The issue's matrix: every operation x team sizes 1, 2, 3, 4, 7, 8 x counts
// 0, 1, 13, 4097 (and 1 Mi + 1 where the buffers do not scale with the
// team) x mapped, direct and staged memory x in place where the operation
// allows it.
void run_matrix(const AgentProcess &agent, const std::string &key_prefix,
                bool wait_together = false) {
    int next_key = 0;
    for (Memory memory : kAllMemory) {
        for (int p : {1, 2, 3, 4, 7, 8}) {
            Team team(agent, p, key_prefix + std::to_string(next_key++), memory);
            if (wait_together) team.wait_together();
            for (CollOp op : {kAllreduce, kReduceScatter, kAllgather, kAlltoall, kBcast}) {
                const bool scales = op == kReduceScatter || op == kAllgather || op == kAlltoall;
                std::vector<size_t> counts = {0, 1, 13, 4097};
                if (!scales && p <= 3) counts.push_back((1u << 20) + 1);
                for (size_t count : counts) {
                    for (bool in_place : {false, true}) {
                        if (in_place && (op == kReduceScatter || op == kBcast)) continue;
                        const size_t n = count * 4;
                        const size_t src_n = (op == kReduceScatter || op == kAlltoall) ? p * n : n;
                        const size_t dst_n = (op == kAllgather || op == kAlltoall) ? p * n : n;
                        std::vector<uint8_t *> src(p), dst(p);
                        std::vector<std::vector<uint8_t>> orig(p);
                        for (int r = 0; r < p; ++r) {
                            dst[r] = team.buffer(r, dst_n);
                            std::memset(dst[r], 0xcd, dst_n);
                            if (in_place) {
                                src[r] = op == kAllgather ? dst[r] + r * n : dst[r];
                            } else {
                                src[r] = team.buffer(r, src_n);
                            }
                            fill(src[r], src_n, uint32_t(r * 7 + count + op), DP_INT32);
                            orig[r].assign(src[r], src[r] + src_n);
                        }
                        auto st = team.run([&](int r, dp_request_t **q) {
                            auto *t = team[r].team;
                            switch (op) {
                                case kAllreduce: return dp_iallreduce(src[r], dst[r], count, DP_INT32, DP_SUM, t, q);
                                case kReduceScatter: return dp_ireduce_scatter(src[r], dst[r], count, DP_INT32, DP_SUM, t, q);
                                case kAllgather: return dp_iallgather(src[r], dst[r], count, DP_INT32, t, q);
                                case kAlltoall: return dp_ialltoall(src[r], dst[r], count, DP_INT32, t, q);
                                case kBcast: return dp_ibcast(r == p - 1 ? src[r] : dst[r], count, DP_INT32, p - 1, t, q);
                                case deputy::testing::kBarrier: return dp_ibarrier(t, q);
                            }
                            return DP_ERR_INTERNAL;
                        });
                        std::string where = "op " + std::to_string(op) + " p " + std::to_string(p) +
                                            " count " + std::to_string(count) + " in_place " +
                                            std::to_string(in_place) + " " + name(memory);
                        for (int r = 0; r < p; ++r) {
                            ASSERT_EQ(st[r], DP_OK) << where;
                            if (n == 0) continue;
                            const uint8_t *got = (op == kBcast && r == p - 1) ? src[r] : dst[r];
                            for (int m = 0; m < (scales && op != kReduceScatter ? p : 1); ++m) {
                                const std::vector<uint8_t> want =
                                    expected_block(op, orig, r, m, count, p - 1);
                                ASSERT_EQ(std::memcmp(got + m * n, want.data(), n), 0)
                                    << where << " rank " << r << " block " << m;
                            }
                        }
                        for (int r = 0; r < p; ++r) {
                            if (!in_place) team.release(r, src[r]);
                            team.release(r, dst[r]);
                        }
                    }
                }
            }
        }
    }
}

TEST_F(CollTest, MatrixOfOperationsSizesCountsMemoryAndInPlace) { run_matrix(agent, "m"); }


// Whoever runs an operation, the bytes are the same: the matrix with every
// member waiting from a thread of its own, so that members run what the
// agent has not started yet (client/rank_execution.h) — and with that
// switched off in the agent, and in the members.
TEST(CollRankExecution, MatrixWhenTheMembersWaitTogether) {
    AgentProcess agent({"--engines", "2"});
    run_matrix(agent, "together", true);
    EXPECT_GT(run_by_members(agent), 0u) << "the members never ran an operation themselves";
}

TEST(CollRankExecution, MatrixWithRankExecutionOffInTheAgent) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string config = dir + "/agent.json";
    std::ofstream(config) << R"({"agent": {"rank_execution_bytes": 0}})";
    AgentProcess agent({"--config", config});
    run_matrix(agent, "agent-only", true);
    EXPECT_EQ(run_by_members(agent), 0u);
    std::filesystem::remove_all(dir);
}

TEST(CollRankExecution, MembersWithRankExecutionOffLeaveEveryOperationToTheAgent) {
    AgentProcess agent({"--engines", "2"});
    {
        setenv("DEPUTY_RANK_EXECUTION", "off", 1);
        Team team(agent, 3, "members-off");
        unsetenv("DEPUTY_RANK_EXECUTION");
        team.wait_together();
        std::vector<int32_t *> buf(3);
        for (int r = 0; r < 3; ++r) buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, 4096));
        for (int k = 0; k < 20; ++k) {
            for (int r = 0; r < 3; ++r)
                for (int i = 0; i < 1024; ++i) buf[r][i] = i * (r + 1) + k;
            auto st = team.run([&](int r, dp_request_t **q) {
                return dp_iallreduce(buf[r], buf[r], 1024, DP_INT32, DP_SUM, team[r].team, q);
            });
            for (int r = 0; r < 3; ++r) {
                ASSERT_EQ(st[r], DP_OK);
                for (int i = 0; i < 1024; ++i) ASSERT_EQ(buf[r][i], 6 * i + 3 * k) << i;
            }
        }
    }
    EXPECT_EQ(run_by_members(agent), 0u);
}

// An MPI program's buffers are ordinary allocations, which libdeputy-mpi
// places in the shared heap: the members read each other's heaps through
// read-only views as they read pools, so the operations they run
// themselves include those (run_by_members counts only theirs here), with
// the agent's bytes.
TEST(CollRankExecution, MembersRunOperationsOnTheirSharedHeapBuffers) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string config = dir + "/agent.json";
    // An agent that sleeps as soon as it is idle, so that the members, all
    // waiting by then, sometimes claim an operation before it wakes.
    std::ofstream(config) << R"({"agent": {"idle_spin_us": 0}})";
    AgentProcess agent({"--config", config});
    Team team(agent, 3, "heap-members", Memory::heap);
    team.wait_together();
    const size_t count = 4096;
    std::vector<int32_t *> src(3), dst(3);
    for (int r = 0; r < 3; ++r) {
        src[r] = reinterpret_cast<int32_t *>(team.buffer(r, 3 * count * 4));
        dst[r] = reinterpret_cast<int32_t *>(team.buffer(r, 3 * count * 4));
    }
    for (int k = 0; k < 400 && (k < 20 || run_by_members(agent) == 0); ++k) {
        for (int r = 0; r < 3; ++r)
            for (size_t i = 0; i < 3 * count; ++i) src[r][i] = int32_t(i * (r + 1) + k);
        auto st = team.run([&](int r, dp_request_t **q) {
            return k % 2 ? dp_ialltoall(src[r], dst[r], count, DP_INT32, team[r].team, q)
                         : dp_iallreduce(src[r], dst[r], count, DP_INT32, DP_SUM, team[r].team, q);
        });
        for (int r = 0; r < 3; ++r) {
            ASSERT_EQ(st[r], DP_OK);
            for (size_t i = 0; i < count; ++i) {
                if (k % 2) {  // block m of rank r's destination: block r of m's source
                    for (int m = 0; m < 3; ++m)
                        ASSERT_EQ(dst[r][m * count + i], src[m][r * count + i]) << k << " " << i;
                } else {
                    ASSERT_EQ(dst[r][i], int32_t(6 * i + 3 * k)) << k << " " << i;
                }
            }
        }
    }
    EXPECT_GT(run_by_members(agent), 0u)
        << "in 400 operations the members never ran one on their heap buffers themselves";
    std::filesystem::remove_all(dir);
}

// A wait loop of the caller's own (libdeputy-mpi's MPI_Wait, which
// progresses MPI between turns) calls dp_test_in_wait: as in dp_wait, the
// members, all in such loops, may run the operation themselves; members
// that only call dp_test never claim one.
TEST(CollRankExecution, MembersInWaitLoopsOfTheirOwnRunOperationsTestersDoNot) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string config = dir + "/agent.json";
    std::ofstream(config) << R"({"agent": {"idle_spin_us": 0}})";
    AgentProcess agent({"--config", config});
    for (bool in_wait : {false, true}) {
        SCOPED_TRACE(in_wait ? "dp_test_in_wait" : "dp_test");
        const uint64_t before = run_by_members(agent);
        Team team(agent, 2, in_wait ? "loops-in-wait" : "loops-test");
        const size_t count = 4096;
        std::vector<int32_t *> buf(2);
        for (int r = 0; r < 2; ++r)
            buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, count * 4));
        const int ops = in_wait ? 400 : 100;
        for (int k = 0; k < ops && !(in_wait && k >= 20 && run_by_members(agent) > before); ++k) {
            for (int r = 0; r < 2; ++r)
                for (size_t i = 0; i < count; ++i) buf[r][i] = int32_t(i * (r + 1) + k);
            std::vector<dp_request_t *> req(2);
            for (int r = 0; r < 2; ++r)
                ASSERT_EQ(dp_iallreduce(buf[r], buf[r], count, DP_INT32, DP_SUM, team[r].team,
                                        &req[r]),
                          DP_OK);
            std::vector<dp_status_t> st(2, DP_ERR_INTERNAL);
            std::vector<std::thread> loops;
            for (int r = 0; r < 2; ++r)
                loops.emplace_back([&, r] {
                    int done = 0;
                    while (!done) {
                        st[r] = in_wait ? dp_test_in_wait(req[r], &done) : dp_test(req[r], &done);
                        if (st[r] != DP_OK && !done) return;
                        sched_yield();
                    }
                });
            for (auto &t : loops) t.join();
            for (int r = 0; r < 2; ++r) {
                dp_request_free(req[r]);
                ASSERT_EQ(st[r], DP_OK);
                for (size_t i = 0; i < count; ++i)
                    ASSERT_EQ(buf[r][i], int32_t(3 * i + 2 * k)) << k << " " << i;
            }
        }
        if (in_wait)
            EXPECT_GT(run_by_members(agent), before)
                << "in 400 operations the members never ran one from dp_test_in_wait";
        else
            EXPECT_EQ(run_by_members(agent), before) << "members that only test claimed one";
    }
    std::filesystem::remove_all(dir);
}

// A wait loop of the caller's own that ends before its operation is done
// (libdeputy-mpi's MPI_Waitany, which returned another request) leaves the
// wait with dp_teams_leave_wait: no teammate may count on the member coming back.
// The agent is stopped (SIGSTOP) while the members post and wait, so that
// who runs the operation is settled between the members alone.
TEST(CollRankExecution, AMemberThatLeavesItsWaitHoldsUpNoTeammate) {
    AgentProcess agent;
    Team team(agent, 2, "leave");
    const size_t count = 4096;
    std::vector<int32_t *> buf(2);
    for (int r = 0; r < 2; ++r) buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, count * 4));
    struct Stopped {
        pid_t pid;
        explicit Stopped(pid_t p) : pid(p) { kill(pid, SIGSTOP); }
        ~Stopped() { kill(pid, SIGCONT); }
    };
    auto post = [&](int k, std::vector<dp_request_t *> *req) {
        for (int r = 0; r < 2; ++r) {
            for (size_t i = 0; i < count; ++i) buf[r][i] = int32_t(i * (r + 1) + k);
            ASSERT_EQ(dp_iallreduce(buf[r], buf[r], count, DP_INT32, DP_SUM, team[r].team,
                                    &(*req)[r]),
                      DP_OK);
        }
    };
    auto check = [&](int k) {
        for (int r = 0; r < 2; ++r)
            for (size_t i = 0; i < count; ++i) ASSERT_EQ(buf[r][i], int32_t(3 * i + 2 * k)) << i;
    };
    {
        SCOPED_TRACE("rank 0 leaves before rank 1 waits: the operation is the agent's");
        const uint64_t before = run_by_members(agent);
        std::vector<dp_request_t *> req(2);
        {
            Stopped stopped(agent.pid());
            post(0, &req);
            int done = 0;
            ASSERT_EQ(dp_test_in_wait(req[0], &done), DP_OK);  // marked; rank 1 is not
            ASSERT_EQ(done, 0);
            ASSERT_EQ(dp_teams_leave_wait(&team[0].team, 1), DP_OK);
            for (int i = 0; i < 100; ++i) {  // would claim it with rank 0 still marked
                ASSERT_EQ(dp_test_in_wait(req[1], &done), DP_OK);
                ASSERT_EQ(done, 0) << "finished with the agent stopped and rank 0 gone";
            }
        }
        // Each from a thread of its own: had rank 1 claimed it, its wait
        // would need rank 0's part.
        std::vector<dp_status_t> st(2, DP_ERR_INTERNAL);
        std::vector<std::thread> waits;
        for (int r = 0; r < 2; ++r) waits.emplace_back([&, r] { st[r] = dp_wait(req[r]); });
        for (auto &w : waits) w.join();
        for (int r = 0; r < 2; ++r) {
            ASSERT_EQ(st[r], DP_OK);
            dp_request_free(req[r]);
        }
        check(0);
        EXPECT_EQ(run_by_members(agent), before)
            << "rank 1 claimed an operation for the members after rank 0 had left its wait";
    }
    {
        SCOPED_TRACE("rank 1 claims while rank 0 is marked, then rank 0 leaves: it runs its part");
        const uint64_t before = run_by_members(agent);
        std::vector<dp_request_t *> req(2);
        std::atomic<bool> first_turn{false};
        int done1 = 0;
        dp_status_t st1 = DP_ERR_INTERNAL;
        {
            Stopped stopped(agent.pid());
            post(1, &req);
            int done0 = 0;
            ASSERT_EQ(dp_test_in_wait(req[0], &done0), DP_OK);
            ASSERT_EQ(done0, 0);
            std::thread rank1([&] {
                // The first turn finds both members waiting and claims the
                // operation for them: rank 1 reads the sources, then needs
                // rank 0's part.
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                do {
                    st1 = dp_test_in_wait(req[1], &done1);
                    first_turn = true;
                } while (st1 == DP_OK && !done1 && std::chrono::steady_clock::now() < deadline);
            });
            while (!first_turn) std::this_thread::yield();
            ASSERT_EQ(dp_teams_leave_wait(&team[0].team, 1), DP_OK);
            rank1.join();
            EXPECT_EQ(st1, DP_OK);
            EXPECT_EQ(done1, 1) << "rank 1 was left waiting for the part of a teammate that had "
                                   "left its wait (the agent is stopped: only the members run)";
            ASSERT_EQ(dp_test(req[0], &done0), DP_OK);
            EXPECT_EQ(done0, 1) << "rank 0 left without writing its own part";
        }
        for (int r = 0; r < 2; ++r) {
            ASSERT_EQ(dp_wait(req[r]), DP_OK);
            dp_request_free(req[r]);
        }
        check(1);
        uint64_t after = before;
        for (int i = 0; i < 200 && (after = run_by_members(agent)) == before; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        EXPECT_EQ(after, before + 1);
    }
}

// Two members leaving their waits on two teams, each in its own order,
// while each owes the other a read on one of them: leaves that each waited
// for their team before going to the next would wait for each other for
// ever. dp_teams_leave_wait does every team's reads before it waits on any.
// The agent is stopped: only the members run the operations.
TEST(CollRankExecution, MembersLeavingTwoTeamsInOppositeOrdersBothFinish) {
    AgentProcess agent;
    dp_config_t config = agent.config();
    config.pool_bytes = 32 << 20;
    std::vector<dp_context_t *> ctx(2, nullptr);
    for (auto &c : ctx) ASSERT_EQ(dp_init(&config, &c), DP_OK);
    std::vector<dp_team_t *> x(2, nullptr), y(2, nullptr);
    for (auto [key, teams] : {std::pair{"two-x", &x}, std::pair{"two-y", &y}}) {
        std::vector<std::thread> joins;
        for (int r = 0; r < 2; ++r)
            joins.emplace_back([&, r, key = key, teams = teams] {
                EXPECT_EQ(dp_team_create(ctx[r], key, r, 2, &(*teams)[r]), DP_OK);
            });
        for (auto &j : joins) j.join();
    }
    const size_t count = 4096;
    std::vector<int32_t *> bx(2), by(2);
    for (int r = 0; r < 2; ++r) {
        bx[r] = static_cast<int32_t *>(dp_malloc(ctx[r], count * 4));
        by[r] = static_cast<int32_t *>(dp_malloc(ctx[r], count * 4));
        ASSERT_TRUE(bx[r] && by[r]);
        for (size_t i = 0; i < count; ++i) {
            bx[r][i] = int32_t(i * (r + 1));
            by[r][i] = int32_t(i * (r + 3));
        }
    }
    std::vector<dp_request_t *> rx(2), ry(2);
    {
        struct Stopped {
            pid_t pid;
            explicit Stopped(pid_t p) : pid(p) { kill(pid, SIGSTOP); }
            ~Stopped() { kill(pid, SIGCONT); }
        } stopped(agent.pid());
        for (int r = 0; r < 2; ++r) {
            ASSERT_EQ(dp_iallreduce(bx[r], bx[r], count, DP_INT32, DP_SUM, x[r], &rx[r]), DP_OK);
            ASSERT_EQ(dp_iallreduce(by[r], by[r], count, DP_INT32, DP_SUM, y[r], &ry[r]), DP_OK);
        }
        int done = 0;
        // Team x: rank 1 marks itself, rank 0 claims and reads; rank 1 owes
        // its read. Team y the other way round.
        ASSERT_EQ(dp_test_in_wait(rx[1], &done), DP_OK);
        ASSERT_EQ(dp_test_in_wait(rx[0], &done), DP_OK);
        ASSERT_EQ(dp_test_in_wait(ry[0], &done), DP_OK);
        ASSERT_EQ(dp_test_in_wait(ry[1], &done), DP_OK);
        std::vector<dp_status_t> st(2, DP_ERR_INTERNAL);
        std::atomic<int> left{0};
        std::thread leave0([&] {
            dp_team_t *teams[] = {x[0], y[0]};
            st[0] = dp_teams_leave_wait(teams, 2);
            ++left;
        });
        std::thread leave1([&] {
            dp_team_t *teams[] = {y[1], x[1]};
            st[1] = dp_teams_leave_wait(teams, 2);
            ++left;
        });
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (left < 2 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (left < 2) {  // the threads wait for each other for ever: nothing to join
            ADD_FAILURE() << "the members leaving two teams in opposite orders waited for each "
                             "other for 10 s";
            kill(agent.pid(), SIGKILL);  // stopped: nothing else would end it
            std::abort();
        }
        leave0.join();
        leave1.join();
        EXPECT_EQ(st[0], DP_OK);
        EXPECT_EQ(st[1], DP_OK);
        for (int r = 0; r < 2; ++r) {  // run by the members, the agent stopped
            ASSERT_EQ(dp_test(rx[r], &done), DP_OK);
            EXPECT_EQ(done, 1) << "rank " << r << ", team x";
            ASSERT_EQ(dp_test(ry[r], &done), DP_OK);
            EXPECT_EQ(done, 1) << "rank " << r << ", team y";
        }
    }
    for (int r = 0; r < 2; ++r) {
        ASSERT_EQ(dp_wait(rx[r]), DP_OK);
        ASSERT_EQ(dp_wait(ry[r]), DP_OK);
        dp_request_free(rx[r]);
        dp_request_free(ry[r]);
        for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(bx[r][i], int32_t(3 * i)) << i;
            ASSERT_EQ(by[r][i], int32_t(7 * i)) << i;
        }
        dp_free(ctx[r], bx[r]);
        dp_free(ctx[r], by[r]);
        dp_team_destroy(x[r]);
        dp_team_destroy(y[r]);
        dp_finalize(ctx[r]);
    }
}

// The same matrix with one engine, and with two engines sharing every
// operation in 4 KiB tasks (the smallest chunk the agent accepts; even the
// small operations the service thread runs itself by default): results
// must not depend on how an operation is cut or who runs which piece.
TEST(CollEngines, MatrixWithOneEngine) {
    AgentProcess agent({"--engines", "1"});
    run_matrix(agent, "one");
}

TEST(CollEngines, MatrixWithTwoEnginesInSmallChunks) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string config = dir + "/agent.json";
    {
        std::ofstream(config) << R"({"agent": {"engines": 2, "coll_chunk_bytes": 4096,
                                 "coll_direct_chunk_bytes": 4096, "coll_inline_bytes": 0}})";
    }
    AgentProcess agent({"--config", config});
    run_matrix(agent, "small");
    std::filesystem::remove_all(dir);
}

TEST_F(CollTest, SixteenOutstandingCompleteInOrderAndTeamsRunSideBySide) {
    Team a(agent, 2, key()), b(agent, 3, key());
    const int kOps = 16;
    const size_t count = 4096;
    std::vector<std::vector<int64_t *>> buf(kOps, std::vector<int64_t *>(2));
    std::vector<std::vector<dp_request_t *>> reqs(kOps, std::vector<dp_request_t *>(2));
    for (int k = 0; k < kOps; ++k)
        for (int r = 0; r < 2; ++r) {
            buf[k][r] = reinterpret_cast<int64_t *>(a.buffer(r, count * 8));
            for (size_t i = 0; i < count; ++i) buf[k][r][i] = int64_t(k * 1000 + r + i);
        }
    // Every member posts all 16 before anyone waits (rank 1 first, on purpose).
    for (int r : {1, 0})
        for (int k = 0; k < kOps; ++k)
            ASSERT_EQ(dp_iallreduce(buf[k][r], buf[k][r], count, DP_INT64, DP_SUM, a[r].team,
                                    &reqs[k][r]),
                      DP_OK);
    // Meanwhile team b does a barrier.
    auto st = b.run([&](int r, dp_request_t **q) { return dp_ibarrier(b[r].team, q); });
    for (auto s : st) EXPECT_EQ(s, DP_OK);
    for (int k = 0; k < kOps; ++k)
        for (int r = 0; r < 2; ++r) {
            ASSERT_EQ(dp_wait(reqs[k][r]), DP_OK);
            dp_request_free(reqs[k][r]);
            for (size_t i = 0; i < count; i += 511)
                ASSERT_EQ(buf[k][r][i], int64_t(2 * (k * 1000 + i) + 1)) << "op " << k;
        }
}

// The per-team slot limit is exact: DP_TEAM_MAX_OUTSTANDING posts succeed,
// the next is refused without a request, destroying the team then is
// refused, and a freed slot serves the next post.
TEST_F(CollTest, OutstandingLimitIsExactAndAFreedSlotServesTheNextPost) {
    Team a(agent, 2, key());
    constexpr int kMax = DP_TEAM_MAX_OUTSTANDING;
    std::vector<int64_t *> buf(2);
    std::vector<std::vector<dp_request_t *>> reqs(2, std::vector<dp_request_t *>(kMax + 1));
    for (int r = 0; r < 2; ++r) {
        buf[r] = reinterpret_cast<int64_t *>(a.buffer(r, (kMax + 1) * 8));
        for (int k = 0; k <= kMax; ++k) buf[r][k] = int64_t(k) * 10 + r;
        for (int k = 0; k < kMax; ++k)
            ASSERT_EQ(dp_iallreduce(&buf[r][k], &buf[r][k], 1, DP_INT64, DP_SUM, a[r].team,
                                    &reqs[r][k]),
                      DP_OK)
                << "rank " << r << " op " << k;
        dp_request_t *extra = reinterpret_cast<dp_request_t *>(&buf);
        EXPECT_EQ(dp_iallreduce(&buf[r][kMax], &buf[r][kMax], 1, DP_INT64, DP_SUM, a[r].team,
                                &extra),
                  DP_ERR_TOO_LARGE);
        EXPECT_EQ(extra, nullptr);
    }
    EXPECT_EQ(dp_team_destroy(a[0].team), DP_ERR_INVALID);  // 64 requests not freed
    for (int r = 0; r < 2; ++r) {
        ASSERT_EQ(dp_wait(reqs[r][0]), DP_OK);
        dp_request_free(reqs[r][0]);
        ASSERT_EQ(dp_iallreduce(&buf[r][kMax], &buf[r][kMax], 1, DP_INT64, DP_SUM, a[r].team,
                                &reqs[r][kMax]),
                  DP_OK);
    }
    for (int r = 0; r < 2; ++r)
        for (int k = 1; k <= kMax; ++k) {
            ASSERT_EQ(dp_wait(reqs[r][k]), DP_OK);
            dp_request_free(reqs[r][k]);
        }
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k <= kMax; ++k) EXPECT_EQ(buf[r][k], int64_t(k) * 20 + 1) << "op " << k;
}

// An adaptive dp_wait yields before it sleeps only for an operation of at
// most kYieldFirstMaxBytes, by the larger of the member's source and
// destination (client/context.h): on both sides of the limit, for each
// kind of count (the whole vector, a block per member, alltoallv's sums).
TEST_F(CollTest, WaitsYieldBeforeSleepingOnlyForOperationsUpToTheLimit) {
    constexpr uint64_t kLimit = deputy::client::kYieldFirstMaxBytes;
    // Counts of 4-byte elements and of bytes at the limit: the whole vector
    // (allreduce), a block per member of 2 (alltoall, reduce_scatter,
    // alltoallv's), bytes (bcast).
    constexpr size_t kVector = kLimit / 4, kBlock = kLimit / 8, kBytes = kLimit;
    Team a(agent, 2, key());
    std::vector<uint8_t *> src(2), dst(2);
    for (int r = 0; r < 2; ++r) {
        src[r] = a.buffer(r, 2 * kLimit + 64);
        dst[r] = a.buffer(r, 2 * kLimit + 64);
    }
    enum Kind { kAllreduceF32, kAlltoallI32, kReduceScatterF32, kBcastU8, kAlltoallvI32 };
    struct Case {
        Kind kind;
        size_t count;  // alltoallv: member 1's count to member 0 (the others kBlock)
        bool yields;
    };
    const Case cases[] = {
        {kAllreduceF32, kVector, true},     {kAllreduceF32, kVector + 1, false},
        {kAlltoallI32, kBlock, true},       {kAlltoallI32, kBlock + 1, false},  // P x n
        {kReduceScatterF32, kBlock, true},  {kReduceScatterF32, kBlock + 1, false},
        {kBcastU8, kBytes, true},           {kBcastU8, kBytes + 1, false},
        {kAlltoallvI32, kBlock, true},      {kAlltoallvI32, kBlock + 1, false},
    };
    for (const Case &c : cases) {
        dp_request_t *req[2] = {};
        // alltoallv: member 0 receives c.count from member 1 (and sends
        // kBlock to it); member 1 sends it, receiving kBlock.
        const size_t v_counts[2][2] = {{kBlock, kBlock}, {c.count, kBlock}};
        const size_t v_recv[2][2] = {{kBlock, c.count}, {kBlock, kBlock}};
        for (int r = 0; r < 2; ++r) {
            dp_team_t *t = a[r].team;
            dp_status_t s = DP_ERR_INVALID;
            switch (c.kind) {
                case kAllreduceF32:
                    s = dp_iallreduce(src[r], dst[r], c.count, DP_FLOAT32, DP_SUM, t, &req[r]);
                    break;
                case kAlltoallI32:
                    s = dp_ialltoall(src[r], dst[r], c.count, DP_INT32, t, &req[r]);
                    break;
                case kReduceScatterF32:
                    s = dp_ireduce_scatter(src[r], dst[r], c.count, DP_FLOAT32, DP_SUM, t, &req[r]);
                    break;
                case kBcastU8: s = dp_ibcast(dst[r], c.count, DP_UINT8, 0, t, &req[r]); break;
                case kAlltoallvI32: {
                    const size_t sdispls[2] = {0, v_counts[r][0]};
                    const size_t rdispls[2] = {0, v_recv[r][0]};
                    s = dp_ialltoallv(src[r], v_counts[r], sdispls, dst[r], v_recv[r], rdispls,
                                      DP_INT32, t, &req[r]);
                    break;
                }
            }
            ASSERT_EQ(s, DP_OK) << "case " << int(c.kind) << " count " << c.count;
            EXPECT_EQ(reinterpret_cast<deputy::client::Request *>(req[r])->yield_first, c.yields)
                << "case " << int(c.kind) << " count " << c.count << " rank " << r;
        }
        for (int r = 0; r < 2; ++r) {
            EXPECT_EQ(dp_wait(req[r]), DP_OK);
            dp_request_free(req[r]);
        }
    }
}

// Slots are taken by the posting thread and given back by another (a
// progress thread waiting and freeing), many times over: the lock-free slot
// bitmap must neither lose nor double-issue a slot (ASan runs this too).
TEST_F(CollTest, RequestsFreedOnAnotherThreadKeepEverySlotInUse) {
    Team a(agent, 2, key());
    constexpr int kOps = 300;
    std::vector<int64_t *> buf(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
        buf[r] = reinterpret_cast<int64_t *>(a.buffer(r, kOps * 8));
        for (int k = 0; k < kOps; ++k) buf[r][k] = int64_t(k) * 10 + r;
    }
    for (int r = 0; r < 2; ++r)
        ranks.emplace_back([&, r] {
            std::counting_semaphore<DP_TEAM_MAX_OUTSTANDING> room(DP_TEAM_MAX_OUTSTANDING);
            std::mutex m;
            std::condition_variable cv;
            std::deque<dp_request_t *> posted;
            std::thread freer([&] {
                for (int k = 0; k < kOps; ++k) {
                    std::unique_lock<std::mutex> lock(m);
                    cv.wait(lock, [&] { return !posted.empty(); });
                    dp_request_t *req = posted.front();
                    posted.pop_front();
                    lock.unlock();
                    EXPECT_EQ(dp_wait(req), DP_OK) << "rank " << r << " op " << k;
                    dp_request_free(req);
                    room.release();
                }
            });
            for (int k = 0; k < kOps; ++k) {
                room.acquire();
                dp_request_t *req = nullptr;
                // A failed post still hands the freer its (null) request, so
                // both threads end.
                EXPECT_EQ(dp_iallreduce(&buf[r][k], &buf[r][k], 1, DP_INT64, DP_SUM, a[r].team,
                                        &req),
                          DP_OK)
                    << "rank " << r << " op " << k;
                std::lock_guard<std::mutex> lock(m);
                posted.push_back(req);
                cv.notify_one();
            }
            freer.join();
        });
    for (auto &t : ranks) t.join();
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < kOps; ++k) ASSERT_EQ(buf[r][k], int64_t(k) * 20 + 1) << "op " << k;
}

// `deputy info` (the agent's JSON) shows each team's size and its
// members' posts still queued: one member's post waits for the other's.
TEST_F(CollTest, InfoShowsEachTeamsQueuedPosts) {
    Team team(agent, 2, key());
    auto team_info = [&] {
        const auto teams = deputy::testing::agent_info(agent)["teams"];
        return teams.empty() ? nlohmann::json{} : teams[0];
    };
    uint8_t *src[2], *dst[2];
    dp_request_t *req[2] = {};
    for (int r = 0; r < 2; ++r) {
        src[r] = team.buffer(r, 64);
        dst[r] = team.buffer(r, 64);
        std::memset(src[r], r + 1, 64);
    }
    ASSERT_EQ(dp_iallreduce(src[0], dst[0], 16, DP_INT32, DP_SUM, team[0].team, &req[0]), DP_OK);
    EXPECT_TRUE(
        deputy::testing::eventually([&] { return team_info().value("queued_posts", 0) == 1; }))
        << team_info().dump();
    EXPECT_EQ(team_info()["size"], 2);
    EXPECT_EQ(team_info()["members_here"], 2);
    ASSERT_EQ(dp_iallreduce(src[1], dst[1], 16, DP_INT32, DP_SUM, team[1].team, &req[1]), DP_OK);
    for (auto *q : req) {
        EXPECT_EQ(dp_wait(q), DP_OK);
        dp_request_free(q);
    }
    EXPECT_TRUE(
        deputy::testing::eventually([&] { return team_info().value("queued_posts", 1) == 0; }))
        << team_info().dump();
    EXPECT_EQ(team_info()["operations"], 1);
}

TEST_F(CollTest, MismatchedArgumentsFailOnEveryRank) {
    Team team(agent, 3, key());
    std::vector<uint8_t *> buf(3);
    for (int r = 0; r < 3; ++r) buf[r] = team.buffer(r, 4096);
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(buf[r], buf[r], r == 2 ? 100 : 101, DP_INT32, DP_SUM, team[r].team, q);
    });
    for (auto s : st) EXPECT_EQ(s, DP_ERR_MISMATCH);
    st = team.run([&](int r, dp_request_t **q) {
        return dp_ibcast(buf[r], 10, DP_INT32, r == 0 ? 1 : 0, team[r].team, q);
    });
    for (auto s : st) EXPECT_EQ(s, DP_ERR_MISMATCH);
    st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(buf[r], buf[r], 10, DP_INT32, r == 1 ? DP_MAX : DP_SUM, team[r].team, q);
    });
    for (auto s : st) EXPECT_EQ(s, DP_ERR_MISMATCH);
    // The team still works afterwards.
    st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(buf[r], buf[r], 10, DP_INT32, DP_SUM, team[r].team, q);
    });
    for (auto s : st) EXPECT_EQ(s, DP_OK);
}

// Staged: a failed operation copies nothing back, and a bounce buffer that
// does not fit the pool is refused at post with nothing lost.
TEST_F(CollTest, StagedCopiesBackOnlyOnSuccessAndRefusesWhatThePoolCannotHold) {
    Team team(agent, 2, key(), Memory::staged);
    std::vector<std::vector<int32_t>> src(2, std::vector<int32_t>(1000, 3)),
        dst(2, std::vector<int32_t>(1000, -1));
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(src[r].data(), dst[r].data(), r == 0 ? 1000 : 999, DP_INT32, DP_SUM,
                             team[r].team, q);
    });
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(st[r], DP_ERR_MISMATCH);
        EXPECT_EQ(dst[r], std::vector<int32_t>(1000, -1)) << "rank " << r;
    }
    // 2 x 24 MiB does not fit a 32 MiB pool.
    const size_t count = 6u << 20;
    std::vector<int32_t> big(count, 1), out(count, 0);
    dp_request_t *req = nullptr;
    EXPECT_EQ(dp_iallreduce(big.data(), out.data(), count, DP_INT32, DP_SUM, team[0].team, &req),
              DP_ERR_NOMEM);
    EXPECT_EQ(req, nullptr);
    // Nothing was posted: the team's next operation pairs up normally.
    st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(src[r].data(), dst[r].data(), 1000, DP_INT32, DP_SUM, team[r].team, q);
    });
    for (int r = 0; r < 2; ++r) {
        ASSERT_EQ(st[r], DP_OK);
        EXPECT_EQ(dst[r], std::vector<int32_t>(1000, 6)) << "rank " << r;
    }
}

TEST_F(CollTest, BuffersOutsideTheMemberAreDenied) {
    Team team(agent, 2, key());
    std::vector<uint8_t> plain(4096, 7);
    uint8_t *mine = team.buffer(0, 4096);
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(r == 0 ? mine : plain.data(), r == 0 ? mine : plain.data(), 1024,
                             DP_INT32, DP_SUM, team[r].team, q);
    });
    for (auto s : st) EXPECT_EQ(s, DP_ERR_DENIED);
    EXPECT_EQ(plain, std::vector<uint8_t>(4096, 7));
}

TEST_F(CollTest, IncompleteTeamTimesOutNamingTheMissingRanks) {
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    dp_team_t *team = nullptr;
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(dp_team_create_timeout(ctx, "lonely", 1, 3, 300, &team), DP_ERR_TIMEOUT);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(ms, 250);
    EXPECT_LE(ms, 2000);
    EXPECT_EQ(team, nullptr);
    EXPECT_EQ(dp_team_create(ctx, "bad", 3, 3, &team), DP_ERR_INVALID);
    dp_finalize(ctx);
}

TEST_F(CollTest, MemberThatDiesFailsTheOthersWithinTheBound) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        dp_config_t config = agent.config();
        dp_context_t *ctx = nullptr;
        dp_team_t *team = nullptr;
        if (dp_init(&config, &ctx) != DP_OK || dp_team_create(ctx, "doomed", 1, 2, &team) != DP_OK)
            _exit(2);
        char c = 1;
        [[maybe_unused]] ssize_t n = write(ready[1], &c, 1);
        pause();  // never posts; killed by the parent
        _exit(0);
    }
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    dp_team_t *team = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    ASSERT_EQ(dp_team_create(ctx, "doomed", 0, 2, &team), DP_OK);
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    auto *buf = static_cast<int32_t *>(dp_malloc(ctx, 4096));
    dp_request_t *req = nullptr;
    ASSERT_EQ(dp_iallreduce(buf, buf, 1024, DP_INT32, DP_SUM, team, &req), DP_OK);
    int done = 0;
    EXPECT_EQ(dp_test(req, &done), DP_OK);
    EXPECT_EQ(done, 0);
    auto start = std::chrono::steady_clock::now();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(dp_wait(req), DP_ERR_AGENT_LOST);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start).count();
    EXPECT_LE(ms, 1000);
    dp_request_free(req);
    // Later posts on the broken team fail at once.
    ASSERT_EQ(dp_iallreduce(buf, buf, 1024, DP_INT32, DP_SUM, team, &req), DP_OK);
    EXPECT_EQ(dp_wait(req), DP_ERR_AGENT_LOST);
    dp_request_free(req);
    EXPECT_EQ(dp_team_destroy(team), DP_OK);
    dp_finalize(ctx);
    close(ready[0]);
    close(ready[1]);
}

}  // namespace

namespace {

// One try of a member dying while the members run a large alltoall
// themselves: the survivor's status (DP_ERR_AGENT_LOST, or DP_OK when the
// victim had read its source before it died).
dp_status_t kill_a_member_mid_operation(const AgentProcess &agent, int attempt,
                                        bool *next_op_lost) {
    const std::string key = "dies-" + std::to_string(attempt);
    constexpr size_t kCount = (32u << 20) / 4 / 2;  // two 16 MiB blocks per member
    int ready[2];
    EXPECT_EQ(pipe(ready), 0);
    dp_config_t config = agent.config();
    config.pool_bytes = 96 << 20;
    pid_t child = fork();
    if (child == 0) {
        dp_context_t *ctx = nullptr;
        dp_team_t *team = nullptr;
        if (dp_init(&config, &ctx) != DP_OK ||
            dp_team_create(ctx, key.c_str(), 1, 2, &team) != DP_OK)
            _exit(2);
        auto *src = static_cast<int32_t *>(dp_malloc(ctx, kCount * 2 * 4));
        auto *dst = static_cast<int32_t *>(dp_malloc(ctx, kCount * 2 * 4));
        std::memset(src, 1, kCount * 2 * 4);
        std::memset(dst, 0, kCount * 2 * 4);
        // Posted (the agent takes the post and goes back to sleep) and
        // waiting when the parent posts: the parent, waiting right after
        // its post, usually claims the operation before the agent wakes up.
        dp_request_t *req = nullptr;
        if (dp_ialltoall(src, dst, kCount, DP_INT32, team, &req) != DP_OK) _exit(3);
        char c = 1;
        [[maybe_unused]] ssize_t n = write(ready[1], &c, 1);
        dp_wait(req);
        pause();  // killed by the parent, done or not
        _exit(0);
    }
    dp_context_t *ctx = nullptr;
    dp_team_t *team = nullptr;
    EXPECT_EQ(dp_init(&config, &ctx), DP_OK);
    EXPECT_EQ(dp_team_create(ctx, key.c_str(), 0, 2, &team), DP_OK);
    auto *src = static_cast<int32_t *>(dp_malloc(ctx, kCount * 2 * 4));
    auto *dst = static_cast<int32_t *>(dp_malloc(ctx, kCount * 2 * 4));
    std::memset(src, 2, kCount * 2 * 4);
    char c;
    EXPECT_EQ(read(ready[0], &c, 1), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // The agent is stopped from the parent's post until the child is dead:
    // it cannot take the operation first, so the members run it (whichever
    // of them waits last claims it), and the agent learns of the death
    // only when it runs again, as it would from a member killed mid-copy.
    kill(agent.pid(), SIGSTOP);
    dp_request_t *req = nullptr;
    EXPECT_EQ(dp_ialltoall(src, dst, kCount, DP_INT32, team, &req), DP_OK);
    std::thread killer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
        kill(agent.pid(), SIGCONT);
    });
    const auto start = std::chrono::steady_clock::now();
    const dp_status_t st = dp_wait(req);
    killer.join();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start).count();
    EXPECT_LE(ms, 2000) << "the survivor waited too long for a dead member";
    dp_request_free(req);
    // The team is broken from here on, whoever ran the operation.
    EXPECT_EQ(dp_ialltoall(src, dst, kCount, DP_INT32, team, &req), DP_OK);
    *next_op_lost = dp_wait(req) == DP_ERR_AGENT_LOST;
    dp_request_free(req);
    EXPECT_EQ(dp_team_destroy(team), DP_OK);
    dp_finalize(ctx);
    close(ready[0]);
    close(ready[1]);
    return st;
}

}  // namespace

// A member that dies while the members run an operation themselves fails
// the team cleanly: the survivor is not left waiting for its part, gets
// DP_ERR_AGENT_LOST (unless the dead member had read its source already),
// the team fails what comes next, and the agent keeps serving with nothing
// of the team left behind.
TEST(CollRankExecution, MemberThatDiesWhileTheMembersRunAnOperationFailsTheTeam) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string config = dir + "/agent.json";
    // The agent is stopped while the members post and run the operation
    // (kill_a_member_mid_operation), so they claim it; the victim may have
    // read its source before it dies (then the survivor's status is DP_OK)
    // or the agent may see the death before the members' claim (then it is
    // not counted as theirs): the loop stops at the first try that is both.
    std::ofstream(config)
        << R"({"agent": {"rank_execution_bytes": 1073741824, "idle_spin_us": 0}})";
    AgentProcess agent({"--config", config});
    const int fds_before = agent.settled_fds();
    int lost_mid_operation = 0;
    for (int attempt = 0; attempt < 120 && lost_mid_operation == 0; ++attempt) {
        const uint64_t before = run_by_members(agent);
        bool next_lost = false;
        const dp_status_t st = kill_a_member_mid_operation(agent, attempt, &next_lost);
        EXPECT_TRUE(st == DP_OK || st == DP_ERR_AGENT_LOST) << dp_status_name(st);
        EXPECT_TRUE(next_lost) << "a later operation of the broken team did not fail";
        const bool by_members = run_by_members(agent) > before;
        if (by_members && st == DP_ERR_AGENT_LOST) ++lost_mid_operation;
    }
    EXPECT_GT(lost_mid_operation, 0)
        << "in 120 tries the members never ran the operation when their teammate died "
           "(the agent took it first)";
    // The agent still serves, and holds nothing of the dead teams.
    {
        Team team(agent, 2, "after");
        std::vector<int32_t *> buf(2);
        for (int r = 0; r < 2; ++r) buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, 64));
        buf[0][0] = 5;
        buf[1][0] = 7;
        auto st = team.run([&](int r, dp_request_t **q) {
            return dp_iallreduce(buf[r], buf[r], 1, DP_INT32, DP_SUM, team[r].team, q);
        });
        EXPECT_EQ(st[0], DP_OK);
        EXPECT_EQ(buf[1][0], 12);
    }
    for (int i = 0; i < 300 && agent.count_fds() != fds_before; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(agent.count_fds(), fds_before) << "fds of the dead teams left in the agent";
    std::filesystem::remove_all(dir);
}

namespace {

// The board of the one team of this process, mapped writable as any
// member may map it: what a member that scribbles on it can do.
struct ScribbledBoard {
    void *base = MAP_FAILED;
    size_t bytes = 0;
    deputy::channel::TeamBoard board;
    // Through the agent's fd table (the members keep no fd of the board),
    // as only root can: the agent is not dumpable.
    ScribbledBoard(pid_t agent, uint32_t team_size) {
        const std::string dir = "/proc/" + std::to_string(agent) + "/fd";
        for (const auto &e : std::filesystem::directory_iterator(dir)) {
            std::error_code ec;
            const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
            if (ec || target.rfind("/memfd:deputy-team-", 0) != 0) continue;
            const int fd = open(e.path().c_str(), O_RDWR | O_CLOEXEC);
            if (fd < 0) continue;
            struct stat st {};
            if (fstat(fd, &st) == 0) {
                bytes = size_t(st.st_size);
                base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            }
            close(fd);
            break;
        }
        EXPECT_NE(base, MAP_FAILED) << "no team board among the agent's fds";
        if (base != MAP_FAILED) board = deputy::channel::TeamBoard(base, team_size);
    }
    ~ScribbledBoard() {
        if (base != MAP_FAILED) munmap(base, bytes);
    }
};

// Waits for `req` at most 5 s (a hang is what these tests look for).
dp_status_t wait_at_most_5s(dp_request_t *req, bool *finished) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int done = 0;
    dp_status_t st = DP_OK;
    while (!done && std::chrono::steady_clock::now() < until) {
        if ((st = dp_test(req, &done)) != DP_OK) break;
        if (!done) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    *finished = done || st != DP_OK;
    return st;
}

}  // namespace

// After its team broke, a survivor's every later operation fails, none
// hangs. The agent fails the posts it gets then under the member's own
// count of them: it used to number them after the last operation it had
// started, which is not the member's count when the members ran operations
// the agent never saw (its thread off the CPU while a teammate posted and
// died): such a post got the number of one the members had claimed, so the
// agent wrote no record and nobody else would. A claim for the ranks on an
// operation nobody ran stands in for that here.
TEST(CollRankExecution, ASurvivorsOperationsAfterItsTeamBrokeAllFail) {
    AgentProcess agent;
    Team team(agent, 2, "broken-then-posted");
    std::vector<int32_t *> buf(2);
    for (int r = 0; r < 2; ++r) buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, 64));
    // (Mapped as the members map it, before their first operation: the
    // agent closes the board to new writers then.)
    ScribbledBoard scribbled(agent.pid(), 2);
    ASSERT_NE(scribbled.base, MAP_FAILED);
    buf[0][0] = 1;
    buf[1][0] = 2;
    auto st = team.run([&](int r, dp_request_t **q) {
        return dp_iallreduce(buf[r], buf[r], 1, DP_INT32, DP_SUM, team[r].team, q);
    });
    ASSERT_EQ(st[0], DP_OK);
    ASSERT_EQ(buf[0][0], 3);
    ASSERT_EQ(scribbled.board.claim(2, deputy::channel::kOwnerRanks), deputy::channel::kOwnerRanks);
    ASSERT_EQ(dp_team_destroy(team[1].team), DP_OK);  // the team is broken when this returns
    team[1].team = nullptr;
    for (int k = 0; k < 4; ++k) {
        dp_request_t *req = nullptr;
        ASSERT_EQ(dp_iallreduce(buf[0], buf[0], 1, DP_INT32, DP_SUM, team[0].team, &req), DP_OK);
        bool finished = false;
        const dp_status_t wst = wait_at_most_5s(req, &finished);
        ASSERT_TRUE(finished) << "operation " << k + 2 << " of the broken team never finished";
        EXPECT_EQ(wst, DP_ERR_AGENT_LOST) << k;
        dp_request_free(req);
    }
}

// A claim word that names nobody (a member wrote nonsense there) breaks
// the team and fails that operation on every member: nobody runs it, so
// its records are the agent's to write. (They were not written: every
// member waited forever.)
TEST(CollRankExecution, AClaimNamingNobodyFailsTheOperationOnEveryMember) {
    AgentProcess agent;
    Team team(agent, 2, "nonsense-claim");
    std::vector<int32_t *> buf(2);
    for (int r = 0; r < 2; ++r) buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, 64));
    ScribbledBoard scribbled(agent.pid(), 2);
    ASSERT_NE(scribbled.base, MAP_FAILED);
    ASSERT_EQ(scribbled.board.claim(1, deputy::channel::BoardOwner(3)), deputy::channel::BoardOwner(3));
    std::vector<dp_request_t *> q(2);
    for (int r = 0; r < 2; ++r)
        ASSERT_EQ(dp_iallreduce(buf[r], buf[r], 1, DP_INT32, DP_SUM, team[r].team, &q[r]), DP_OK);
    for (int r = 0; r < 2; ++r) {
        bool finished = false;
        const dp_status_t wst = wait_at_most_5s(q[r], &finished);
        ASSERT_TRUE(finished) << "member " << r << " waits for an operation nobody runs";
        EXPECT_EQ(wst, DP_ERR_AGENT_LOST) << r;
        dp_request_free(q[r]);
    }
    // And the team stays broken: the next operation fails at once.
    for (int r = 0; r < 2; ++r)
        ASSERT_EQ(dp_iallreduce(buf[r], buf[r], 1, DP_INT32, DP_SUM, team[r].team, &q[r]), DP_OK);
    for (int r = 0; r < 2; ++r) {
        bool finished = false;
        EXPECT_EQ(wait_at_most_5s(q[r], &finished), DP_ERR_AGENT_LOST) << r;
        EXPECT_TRUE(finished) << r;
        dp_request_free(q[r]);
    }
}

// A member's pool (and the read-only view of it its teammates get) and a
// team's board are memfds: any process of the user can open them again
// through /proc/<pid>/fd, writable whatever the fd it found was opened
// for. Once their writers mapped them (the client its pool at dp_init, every
// member the board before its first operation) nobody maps them writable
// or write()s them, through any fd; the writers' own mappings keep working.
TEST(CollRankExecution, NoProcessMapsAPoolOrABoardWritableAfterItsWriters) {
    AgentProcess agent;
    Team team(agent, 2, "sealed");
    std::vector<int32_t *> buf(2);
    for (int r = 0; r < 2; ++r) buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, 64));
    auto run_once = [&](int k) {
        buf[0][0] = k;
        buf[1][0] = 2 * k;
        auto st = team.run([&](int r, dp_request_t **q) {
            return dp_iallreduce(buf[r], buf[r], 1, DP_INT32, DP_SUM, team[r].team, q);
        });
        ASSERT_EQ(st[0], DP_OK);
        ASSERT_EQ(st[1], DP_OK);
        ASSERT_EQ(buf[0][0], 3 * k);
        ASSERT_EQ(buf[1][0], 3 * k);
    };
    run_once(1);
    // The members hold no fd of either (they map what they receive and close
    // it: client/control_channel.h), so the agent's are the ones to try.
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
        // (Its shared heap it keeps: it grows and punches it. agent.md says
        // what that leaves open.)
        if (target.find("memfd:deputy-heap") != std::string::npos) continue;
        EXPECT_EQ(target.find("memfd:deputy-"), std::string::npos) << "a member holds " << target;
    }
    int pools = 0, boards = 0;
    const std::string agent_fds = "/proc/" + std::to_string(agent.pid()) + "/fd";
    for (const auto &e : std::filesystem::directory_iterator(agent_fds)) {
        std::error_code ec;
        const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
        const bool pool = target.rfind("/memfd:deputy-client-", 0) == 0;
        const bool board = target.rfind("/memfd:deputy-team-", 0) == 0;
        if (ec || (!pool && !board)) continue;
        (pool ? pools : boards) += 1;
        SCOPED_TRACE(target);
        const int fd = open(e.path().c_str(), O_RDWR | O_CLOEXEC);  // as any process could
        ASSERT_GE(fd, 0) << std::strerror(errno);
        EXPECT_NE(fcntl(fd, F_GET_SEALS) & F_SEAL_FUTURE_WRITE, 0);
        errno = 0;
        void *w = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        EXPECT_EQ(w, MAP_FAILED) << "mapped writable";
        EXPECT_EQ(errno, EPERM);
        if (w != MAP_FAILED) munmap(w, 4096);
        errno = 0;
        EXPECT_EQ(pwrite(fd, "x", 1, 0), -1) << "written";
        EXPECT_EQ(errno, EPERM);
        void *r = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);  // reading stays possible
        EXPECT_NE(r, MAP_FAILED);
        if (r != MAP_FAILED) munmap(r, 4096);
        close(fd);
    }
    // Each member's pool, and the team's board.
    EXPECT_GE(pools, 2);
    EXPECT_GE(boards, 1);
    run_once(5);  // the writers' own mappings still work
}

// A member that only tests operations the agent ran (completion seen at
// the first dp_test, so nothing of the board is looked at) falls more than
// the board's 128 slots behind its teammate, which waits; the operations
// the members run next must still find the lagging member's part done.
TEST(CollRankExecution, AMemberThatOnlyTestedManyOperationsStillRunsTheNextOnes) {
    AgentProcess agent({"--engines", "2"});
    Team team(agent, 2, "tested");
    std::vector<int32_t *> buf(2);
    for (int r = 0; r < 2; ++r) buf[r] = reinterpret_cast<int32_t *>(team.buffer(r, 64));
    for (int k = 0; k < 300; ++k) {
        std::vector<dp_request_t *> q(2);
        for (int r = 0; r < 2; ++r) {
            buf[r][0] = k + r;
            ASSERT_EQ(dp_iallreduce(buf[r], buf[r], 1, DP_INT32, DP_SUM, team[r].team, &q[r]),
                      DP_OK);
        }
        ASSERT_EQ(dp_wait(q[0]), DP_OK);
        for (int done = 0; !done;) ASSERT_EQ(dp_test(q[1], &done), DP_OK);
        for (int r = 0; r < 2; ++r) {
            dp_request_free(q[r]);
            ASSERT_EQ(buf[r][0], 2 * k + 1);
        }
    }
    const uint64_t before = run_by_members(agent);
    team.wait_together();
    // (Until the members ran some: the agent takes many as soon as it sees them.)
    for (int k = 0; k < 3000 && (k < 300 || run_by_members(agent) == before); ++k) {
        auto st = team.run([&](int r, dp_request_t **q) {
            buf[r][0] = k * 3 + r;
            return dp_iallreduce(buf[r], buf[r], 1, DP_INT32, DP_SUM, team[r].team, q);
        });
        for (int r = 0; r < 2; ++r) {
            ASSERT_EQ(st[r], DP_OK) << k;
            ASSERT_EQ(buf[r][0], 6 * k + 1) << k;
        }
    }
    EXPECT_GT(run_by_members(agent), before) << "the members never ran one of the operations";
}
