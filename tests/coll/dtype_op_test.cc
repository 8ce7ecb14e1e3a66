// Every dtype x op of dp_dtype_t / dp_op_t through every reducing algorithm,
// on every team size, in place and not: the schedules carry dtype and op to
// each reduce step and must cut blocks on element boundaries for 1-, 2-, 4-
// and 8-byte elements alike. Bit-exact (see reference.h for why that holds
// for float16 and bfloat16 too).
#include <gtest/gtest.h>

#include "harness.h"
#include "mover/names.h"

namespace deputy::test {
namespace {

using Param = std::tuple<const coll::Algorithm *, dp_dtype_t>;

class DtypeOpTest : public testing::TestWithParam<Param> {};

TEST_P(DtypeOpTest, EveryOpEveryTeam) {
    const auto [algorithm, dtype] = GetParam();
    uint64_t seed = 1000;
    for (int size = 1; size <= 8; ++size) {
        for (dp_op_t op : {DP_SUM, DP_PROD, DP_MIN, DP_MAX, DP_LAND, DP_LOR, DP_LXOR, DP_BAND,
                           DP_BOR, DP_BXOR}) {
            if (!deputy::mover::op_applies(unsigned(dtype), unsigned(op))) continue;
            for (size_t count : {size_t{1}, size_t{5}, static_cast<size_t>(3 * size + 2)}) {
                for (bool in_place : {false, true}) {
                    Case c;
                    c.algorithm = algorithm;
                    c.size = size;
                    c.count = count;
                    c.dtype = dtype;
                    c.op = op;
                    c.in_place = in_place;
                    c.chunk_bytes = count > 2 ? 2 * dp_dtype_size(dtype) : 0;
                    c.seed = seed++;
                    ASSERT_TRUE(run_case(c));
                }
            }
        }
    }
}

std::vector<Param> reducing_algorithms_by_dtype() {
    std::vector<Param> out;
    for (const coll::Algorithm &a : coll::all_algorithms()) {
        if (!coll::reduces(a.collective)) continue;
        for (int d = 0; d < DP_DTYPE_COUNT; ++d) out.emplace_back(&a, static_cast<dp_dtype_t>(d));
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(Reducing, DtypeOpTest, testing::ValuesIn(reducing_algorithms_by_dtype()),
                         [](const testing::TestParamInfo<Param> &info) {
                             return fmt::format("{}_{}", std::get<0>(info.param)->full_name,
                                                dp_dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace deputy::test
