// One-node plans (coll/local_plan.h) run by the memory runner
// (coll/transport/memory/task_runner.h) over in-memory members: every
// collective x team sizes 1..8 x counts 0, 1, 13, 4097 x dtypes and ops x
// in place, with members reached in place and members reached by copies
// (as the agent reaches ordinary memory), tasks run in a random order and
// several chunk sizes. Results are compared byte for byte with the
// reference (tests/coll/reference.h); bytes outside every destination must
// stay as they were.
#include "coll/local_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "coll/transport/memory/task_runner.h"
#include "coll/vector_counts.h"
#include "reference.h"
#include "vector_layout.h"
#include "mover/names.h"

namespace deputy::coll {
namespace {

using test::Bytes;

constexpr uint8_t kGuard = 0xA7;
constexpr size_t kSlack = 64;  // guard bytes around every buffer

// Each member's memory is one vector with guards at both ends; its source
// and destination are offsets in it (equal, or the source at its block of
// the destination, when in place), as a member's two pointers are. Some
// members are reached in place, the others only by copies (as the agent
// reaches ordinary memory).
struct Member {
    Bytes memory;
    uint64_t src = 0, dst = 0;
    bool copied = false;
};

class MemoryBuffers final : public TaskBuffers {
  public:
    explicit MemoryBuffers(std::vector<Member> *members) : members_(members) {}

    uint8_t *in_place(const Piece &p, uint64_t len, bool) const override {
        return (*members_)[p.rank].copied ? nullptr : at(p, len);
    }
    bool copy_in(const Piece &p, void *out, uint64_t len, std::string *why) const override {
        const uint8_t *q = at(p, len);
        if (!q) return *why = "out of range", false;
        std::memcpy(out, q, len);
        return true;
    }
    bool copy_out(const Piece &p, const void *in, uint64_t len, std::string *why) const override {
        uint8_t *q = at(p, len);
        if (!q) return *why = "out of range", false;
        std::memcpy(q, in, len);
        return true;
    }

  private:
    uint8_t *at(const Piece &p, uint64_t len) const {
        Member &m = (*members_)[p.rank];
        const uint64_t base = p.where == Where::source ? m.src : m.dst;
        if (base + p.offset + len > m.memory.size() - kSlack) return nullptr;
        return m.memory.data() + base + p.offset;
    }
    std::vector<Member> *members_;
};

struct Case {
    Collective c;
    uint32_t p;
    uint64_t count;
    dp_dtype_t dtype;
    dp_op_t op;
    bool in_place;
    uint64_t chunk;
};

std::string name(const Case &k) {
    return std::string(collective_name(k.c)) + " p" + std::to_string(k.p) + " n" +
           std::to_string(k.count) + " " + dp_dtype_name(k.dtype) + " " + dp_op_name(k.op) +
           (k.in_place ? " in place" : "") + " chunk " + std::to_string(k.chunk);
}

void check(const Case &k, uint64_t seed) {
    SCOPED_TRACE(name(k));
    std::mt19937_64 random(seed);
    const uint64_t e = dp_dtype_size(k.dtype), n = k.count * e;
    CollectiveArgs ca;
    ca.collective = k.c;
    ca.size = int(k.p);
    ca.count = k.count;
    ca.dtype = k.dtype;
    ca.op = k.op;
    ca.root = int(k.p / 2);
    std::vector<Bytes> inputs(k.p);
    for (auto &in : inputs)
        in = coll::reduces(k.c) ? test::exact_data(k.dtype, k.op, test::input_bytes(ca) / e, random)
                                : test::random_bytes(test::input_bytes(ca), random);
    const std::vector<Bytes> expected = test::expected_outputs(ca, inputs);
    const MemberBytes sizes = member_bytes(k.c, k.count, e, k.p);
    const uint64_t dst_bytes = std::max(sizes.destination, sizes.source);
    // Buffers with guards; in place the input starts in the destination.
    std::vector<Member> members(k.p);
    for (uint32_t r = 0; r < k.p; ++r) {
        Member &m = members[r];
        m.copied = (random() % 2) == 1;
        const bool one_buffer = k.in_place || k.c == Collective::bcast;
        m.memory.assign(2 * kSlack + dst_bytes + (one_buffer ? 0 : sizes.source), kGuard);
        m.dst = kSlack;
        m.src = one_buffer ? kSlack + (k.c == Collective::allgather ? r * n : 0)
                           : kSlack + dst_bytes;
        std::copy(inputs[r].begin(), inputs[r].end(), m.memory.begin() + long(m.src));
    }
    MemoryBuffers buffers(&members);
    LocalArgs args{k.c, k.p, k.count, k.dtype, k.op, uint32_t(ca.root), k.chunk};
    LocalPlan plan = build_local_plan(args);
    std::vector<size_t> order(plan.tasks.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    for (size_t i : order) {
        std::string why;
        ASSERT_EQ(run_task(plan, plan.tasks[i], buffers, &why), DP_COMP_SUCCESS) << why;
        ASSERT_LE(plan.tasks[i].bytes, std::max<uint64_t>(k.chunk / e * e, e));
    }
    for (uint32_t r = 0; r < k.p; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        const Member &m = members[r];
        const Bytes &want = expected[r];
        const size_t check_bytes = k.c == Collective::reduce_scatter ? n : want.size();
        ASSERT_TRUE(std::equal(want.begin(), want.begin() + long(check_bytes),
                               m.memory.begin() + long(m.dst)));
        for (size_t i = 0; i < kSlack; ++i) {
            ASSERT_EQ(m.memory[i], kGuard);
            ASSERT_EQ(m.memory[m.memory.size() - 1 - i], kGuard);
        }
        // Out of place, sources are never written.
        if (m.src != m.dst && k.c != Collective::bcast && !k.in_place) {
            ASSERT_TRUE(std::equal(inputs[r].begin(), inputs[r].end(),
                                   m.memory.begin() + long(m.src)));
        }
    }
}

TEST(LocalPlan, EveryCollectiveSizeCountAndPlacementIsBitExact) {
    uint64_t seed = 1;
    for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                         Collective::alltoall, Collective::bcast, Collective::barrier})
        for (uint32_t p : {1u, 2u, 3u, 4u, 7u, 8u})
            for (uint64_t count : {0ull, 1ull, 13ull, 4097ull})
                for (bool in_place : {false, true}) {
                    if (in_place && (c == Collective::bcast || c == Collective::barrier ||
                                     c == Collective::reduce_scatter))
                        continue;
                    for (uint64_t chunk : {uint64_t(4), uint64_t(1000), uint64_t(256) << 10})
                        check({c, p, count, DP_INT32, DP_SUM, in_place, chunk}, seed++);
                }
}

TEST(LocalPlan, EveryDtypeAndOpReducesInRankOrder) {
    uint64_t seed = 1000;
    for (int d = 0; d < DP_DTYPE_COUNT; ++d)
        for (int o = 0; o < DP_OP_COUNT; ++o)
            for (Collective c : {Collective::allreduce, Collective::reduce_scatter})
                if (deputy::mover::op_applies(unsigned(d), unsigned(o)))
                check({c, 5, 1001, dp_dtype_t(d), dp_op_t(o), false, 1024}, seed++);
}

TEST(LocalPlan, TasksRespectTheChunkAndAlltoallPairsShareTasks) {
    LocalArgs a{Collective::alltoall, 8, 4, DP_UINT8, DP_SUM, 0, 64};
    LocalPlan plan = build_local_plan(a);
    // 8 x 8 blocks of 4 bytes in pairs: 36 pairs, at most 16 moves (64 B) per task.
    uint64_t moves = 0;
    for (const Task &t : plan.tasks) {
        EXPECT_LE(t.inputs * t.bytes, 64u);
        EXPECT_EQ(t.inputs, t.outputs);
        moves += t.inputs;
    }
    EXPECT_EQ(moves, 64u);
    LocalArgs big{Collective::allreduce, 2, (1 << 20) + 1, DP_FLOAT32, DP_SUM, 0, 256 << 10};
    LocalPlan p2 = build_local_plan(big);
    EXPECT_EQ(p2.tasks.size(), 17u);  // 4 MiB + 4 B in 256 KiB pieces
    EXPECT_EQ(p2.max_task_bytes, uint64_t(256) << 10);
}

// A task that names an input twice says so as the plan is built (its
// runner reads it once); the collectives' plans name each input once.
TEST(LocalPlan, RepeatedInputsAreFoundAsThePlanIsBuilt) {
    for (size_t n : {size_t(2), size_t(5), size_t(33), size_t(1000)}) {
        SCOPED_TRACE("pieces " + std::to_string(n));
        std::vector<Piece> in(n), out(n);
        for (uint32_t i = 0; i < n; ++i) {
            in[i] = {Where::source, i % 7, uint64_t(i) * 8};
            out[i] = {Where::destination, i, 0};
        }
        LocalPlan plan;
        plan.add(Task::Kind::move, 8, in, out);
        in[n - 1] = in[0];  // the last reads the first's bytes again
        plan.add(Task::Kind::move, 8, in, out);
        ASSERT_EQ(plan.tasks.size(), 2u);
        EXPECT_FALSE(plan.tasks[0].repeats);
        EXPECT_TRUE(plan.tasks[1].repeats);
        std::vector<uint32_t> first;
        first_equal(plan.inputs(plan.tasks[1]), &first);
        for (uint32_t i = 0; i + 1 < n; ++i) ASSERT_EQ(first[i], i);
        EXPECT_EQ(first[n - 1], 0u);
    }
    for (int i = 0; i < kCollectiveCount; ++i) {
        const auto c = Collective(i);
        if (is_vector(c)) continue;
        for (uint32_t p : {2u, 8u, 300u}) {
            LocalArgs a{c, p, 1, DP_INT32, DP_SUM, 0, 256 << 10};
            for (const Task &t : build_local_plan(a).tasks)
                ASSERT_FALSE(t.repeats) << collective_name(c) << " of " << p;
        }
    }
}

// A member's own plan (LocalArgs::writer) is the whole plan's tasks that
// write its destination, in the same order, each with the outputs there
// and the inputs they take (all of a reduce's, the paired ones of a
// move's): whoever runs a task, the bytes are the same.
TEST(LocalPlan, AWritersPlanIsTheWholePlansTasksThatWriteItsDestination) {
    for (int i = 0; i < kCollectiveCount; ++i) {
        const auto c = Collective(i);
        if (is_vector(c)) continue;  // (their blocks come from `vectors`)
        for (uint32_t p : {1u, 3u, 8u, 100u})
            for (uint64_t count : {1ull, 13ull, 4097ull}) {
                LocalArgs whole{c, p, count, DP_INT32, DP_SUM, p - 1, 1024};
                const LocalPlan all = build_local_plan(whole);
                for (uint32_t w : {0u, p / 2, p - 1}) {
                    LocalArgs mine = whole;
                    mine.writer = w;
                    const LocalPlan own = build_local_plan(mine);
                    size_t next = 0;
                    for (const Task &t : all.tasks) {
                        const auto whole_in = all.inputs(t), whole_out = all.outputs(t);
                        const bool paired = t.kind == Task::Kind::move &&
                                            whole_in.size() == whole_out.size() &&
                                            whole_in.size() > 1;
                        std::vector<Piece> in, out;
                        for (size_t k = 0; k < whole_out.size(); ++k)
                            if (whole_out[k].where == Where::destination &&
                                whole_out[k].rank == w) {
                                out.push_back(whole_out[k]);
                                if (paired) in.push_back(whole_in[k]);
                            }
                        if (out.empty()) continue;
                        if (!paired) in.assign(whole_in.begin(), whole_in.end());
                        const std::string where = std::string(collective_name(c)) + " p " +
                                                  std::to_string(p) + " count " +
                                                  std::to_string(count) + " writer " +
                                                  std::to_string(w);
                        ASSERT_LT(next, own.tasks.size()) << where;
                        const Task &o = own.tasks[next++];
                        ASSERT_EQ(o.kind, t.kind) << where;
                        ASSERT_EQ(o.bytes, t.bytes) << where;
                        ASSERT_TRUE(std::ranges::equal(own.inputs(o), in)) << where;
                        ASSERT_TRUE(std::ranges::equal(own.outputs(o), out)) << where;
                    }
                    ASSERT_EQ(next, own.tasks.size());
                }
            }
    }
}

// alltoallv: uneven blocks (zeros, a member that sends nothing), blocks in
// shuffled order with gaps between them, members in place and by copies,
// tasks in a random order. Destination blocks bit-exact; every byte outside
// them (gaps, guards) and every source byte unchanged.
void check_alltoallv(uint32_t p, dp_dtype_t dtype, uint64_t chunk, uint64_t seed) {
    SCOPED_TRACE("alltoallv p" + std::to_string(p) + " " + dp_dtype_name(dtype) + " chunk " +
                 std::to_string(chunk) + " seed " + std::to_string(seed));
    std::mt19937_64 random(seed);
    const uint64_t e = dp_dtype_size(dtype);
    const test::VectorLayout l =
        test::make_vector_layout(p, 700, 5, uint32_t(seed % (p + 1)), random);
    std::vector<MemberVector> vectors(p);
    std::vector<Member> members(p);
    std::vector<Bytes> sources(p), before(p);
    for (uint32_t r = 0; r < p; ++r) {
        const std::vector<uint64_t> block = test::counts_block(l, r);
        std::string why;
        ASSERT_EQ(decode_vector_counts(block.data(), block.size() * 8, p, e, 1ull << 36,
                                       &vectors[r], &why),
                  DP_OK)
            << why;
        Member &m = members[r];
        m.copied = (random() % 2) == 1;
        const uint64_t dst_bytes = l.recv_extent[r] * e, src_bytes = l.send_extent[r] * e;
        m.memory = test::random_bytes(3 * kSlack + dst_bytes + src_bytes, random);
        std::fill(m.memory.begin(), m.memory.begin() + kSlack, kGuard);
        std::fill(m.memory.end() - kSlack, m.memory.end(), kGuard);
        m.dst = kSlack;
        m.src = 2 * kSlack + dst_bytes;
        sources[r].assign(m.memory.begin() + long(m.src),
                          m.memory.begin() + long(m.src + src_bytes));
        before[r] = m.memory;
    }
    std::vector<const MemberVector *> all;
    for (const MemberVector &v : vectors) all.push_back(&v);
    ASSERT_EQ(vector_difference(all), "");
    MemoryBuffers buffers(&members);
    LocalArgs args{Collective::alltoallv, p, 0, dtype, DP_SUM, 0, chunk};
    args.vectors = &vectors;
    LocalPlan plan = build_local_plan(args);
    std::vector<size_t> order(plan.tasks.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    for (size_t i : order) {
        std::string why;
        ASSERT_EQ(run_task(plan, plan.tasks[i], buffers, &why), DP_COMP_SUCCESS) << why;
        ASSERT_LE(plan.tasks[i].bytes * plan.tasks[i].inputs,
                  std::max<uint64_t>(chunk / e * e, e));
    }
    for (uint32_t r = 0; r < p; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        Bytes want = before[r];  // everything as it was but the received blocks
        for (uint32_t from = 0; from < p; ++from) {
            const uint64_t bytes = l.counts[from][r] * e;
            const uint64_t in = l.sdispls[from][r] * e;
            const uint64_t out = members[r].dst + l.rdispls[r][from] * e;
            std::copy(sources[from].begin() + long(in), sources[from].begin() + long(in + bytes),
                      want.begin() + long(out));
        }
        ASSERT_TRUE(members[r].memory == want);
    }
}

TEST(LocalPlan, AlltoallvUnevenBlocksWithGapsAreBitExactAndTouchNothingElse) {
    uint64_t seed = 5000;
    for (uint32_t p : {1u, 2u, 3u, 4u, 7u})
        for (dp_dtype_t dtype : {DP_UINT8, DP_INT32, DP_FLOAT64})
            for (uint64_t chunk : {uint64_t(8), uint64_t(1000), uint64_t(256) << 10})
                for (int rep = 0; rep < 3; ++rep) check_alltoallv(p, dtype, chunk, seed++);
}

TEST(LocalPlan, AlltoallvWithEqualCountsBatchesLikeAlltoall) {
    // 8 members, 4 bytes to each: 64 moves of 4 bytes, 16 per 64-byte task.
    const uint32_t p = 8;
    std::vector<MemberVector> vectors(p);
    for (uint32_t r = 0; r < p; ++r)
        for (uint32_t m = 0; m < p; ++m) {
            vectors[r].send.push_back({m * 4, 4});
            vectors[r].recv.push_back({m * 4, 4});
        }
    LocalArgs a{Collective::alltoallv, p, 0, DP_UINT8, DP_SUM, 0, 64};
    a.vectors = &vectors;
    LocalPlan plan = build_local_plan(a);
    uint64_t moves = 0;
    for (const Task &t : plan.tasks) {
        EXPECT_EQ(t.inputs * t.bytes, 64u);
        EXPECT_EQ(t.inputs, t.outputs);
        moves += t.inputs;
    }
    EXPECT_EQ(moves, 64u);
    EXPECT_EQ(plan.tasks.size(), 4u);
}

}  // namespace
}  // namespace deputy::coll
