// Every algorithm on every team size from 1 to 8, in place and not, over
// counts that stress the block arithmetic (0, 1, odd, P - 1, not a multiple
// of P, large), four dtypes and three chunkings (none, tiny pieces that cut
// every message, pieces of about a third of a message). Each case is run by
// harness.h: bit-exact results, untouched sources, traffic as documented.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "harness.h"

namespace deputy::test {
namespace {

using Param = std::tuple<const coll::Algorithm *, int, bool>;

class CollectiveTest : public testing::TestWithParam<Param> {};

std::vector<size_t> counts_for(int p) {
    const auto pz = static_cast<size_t>(p);
    std::set<size_t> counts = {0, 1, 2, 7, pz - 1, pz + 1, 3 * pz + 1, 4 * pz, 250 * pz + 3, 4099};
    return {counts.begin(), counts.end()};
}

TEST_P(CollectiveTest, MatchesReference) {
    const auto [algorithm, size, in_place] = GetParam();
    uint64_t seed = 1;
    for (size_t count : counts_for(size)) {
        for (dp_dtype_t dtype : {DP_INT32, DP_INT64, DP_FLOAT32, DP_FLOAT64}) {
            const size_t e = dp_dtype_size(dtype);
            std::vector<size_t> chunks = {0};
            if (algorithm->pipelines && count > 0) {
                if (count <= 300) chunks.push_back(3 * e);
                chunks.push_back(std::max<size_t>(1, count / 3) * e + 1);  // not a whole element
            }
            for (size_t chunk : chunks) {
                Case c;
                c.algorithm = algorithm;
                c.size = size;
                c.count = count;
                c.dtype = dtype;
                c.op = DP_SUM;
                c.in_place = in_place;
                c.chunk_bytes = chunk;
                c.root = static_cast<int>(count % static_cast<size_t>(size));
                c.seed = seed++;
                ASSERT_TRUE(run_case(c));
            }
        }
    }
}

std::string name(const testing::TestParamInfo<Param> &info) {
    const auto [algorithm, size, in_place] = info.param;
    return fmt::format("{}_P{}{}", algorithm->full_name, size, in_place ? "_in_place" : "");
}

// Every algorithm x P = 1..8 x {out of place, in place where MPI has it}.
std::vector<Param> every_case() {
    std::vector<Param> out;
    for (const coll::Algorithm &a : coll::all_algorithms()) {
        for (int p = 1; p <= 8; ++p) {
            out.emplace_back(&a, p, false);
            if (coll::has_in_place(a.collective)) out.emplace_back(&a, p, true);
        }
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, CollectiveTest, testing::ValuesIn(every_case()), name);

}  // namespace
}  // namespace deputy::test
