// Reductions of arbitrary floats, where the order of combination changes the
// rounding: results are compared with a float64 (long double for float64)
// reference within the error bound of a sum of P terms, and — the property an
// application notices — every rank of an allreduce must end with the very
// same bytes, whatever its position in the algorithm.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"

namespace deputy::test {
namespace {

template <typename T>
void check_float_allreduce(const coll::Algorithm &algorithm, dp_dtype_t dtype, int size,
                           size_t count, bool in_place, size_t chunk_bytes, uint64_t seed) {
    SCOPED_TRACE(fmt::format("{} {} P={} count={}{} chunk={}", algorithm.full_name,
                             dp_dtype_name(dtype), size, count, in_place ? " in-place" : "",
                             chunk_bytes));
    Case c;
    c.algorithm = &algorithm;
    c.size = size;
    c.count = count;
    c.dtype = dtype;
    c.in_place = in_place;
    c.chunk_bytes = chunk_bytes;
    std::vector<coll::Schedule> team;
    ASSERT_TRUE(build_team(c, team));

    std::mt19937_64 random(seed);
    std::uniform_real_distribution<T> value(-1, 1);
    std::vector<std::vector<T>> inputs(static_cast<size_t>(size), std::vector<T>(count));
    for (auto &in : inputs) {
        for (T &x : in) x = value(random);
    }
    const coll::KernelReducer reducer;
    MemoryExecutor executor(team, reducer);
    const coll::BufferId input = in_place ? coll::BufferId::destination : coll::BufferId::source;
    for (int r = 0; r < size; ++r) {
        std::memcpy(executor.buffer(r, input).data(), inputs[static_cast<size_t>(r)].data(),
                    count * sizeof(T));
    }
    const Execution run = executor.run(seed);
    ASSERT_TRUE(run.ok) << run.error;

    const Bytes &first = executor.buffer(0, coll::BufferId::destination);
    for (int r = 1; r < size; ++r) {
        ASSERT_EQ(executor.buffer(r, coll::BufferId::destination), first)
            << "rank " << r << " differs from rank 0";
    }
    std::vector<T> got(count);
    std::memcpy(got.data(), first.data(), count * sizeof(T));
    for (size_t i = 0; i < count; ++i) {
        long double exact = 0, magnitude = 0;
        for (const auto &in : inputs) {
            exact += in[i];
            magnitude += std::fabs(static_cast<long double>(in[i]));
        }
        // Each of the P - 1 additions rounds by at most half an ulp of a
        // partial sum bounded by `magnitude`.
        const long double bound =
            static_cast<long double>(size) * std::numeric_limits<T>::epsilon() * magnitude;
        ASSERT_LE(std::fabs(static_cast<long double>(got[i]) - exact), bound) << "element " << i;
    }
}

TEST(FloatReductionTest, AllreduceWithinBoundAndIdenticalOnEveryRank) {
    uint64_t seed = 77;
    for (const coll::Algorithm &a : coll::all_algorithms()) {
        if (a.collective != coll::Collective::allreduce) continue;
        for (int size = 1; size <= 8; ++size) {
            for (size_t count : {size_t{1}, size_t{13}, size_t{1001}}) {
                for (bool in_place : {false, true}) {
                    for (size_t chunk : {size_t{0}, size_t{40}}) {
                        check_float_allreduce<float>(a, DP_FLOAT32, size, count, in_place, chunk,
                                                     seed++);
                        check_float_allreduce<double>(a, DP_FLOAT64, size, count, in_place, chunk,
                                                      seed++);
                        if (HasFatalFailure()) return;
                    }
                }
            }
        }
    }
}

}  // namespace
}  // namespace deputy::test
