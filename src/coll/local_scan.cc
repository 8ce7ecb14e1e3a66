// Scan and exscan among the members of one node: member r's destination is
// the reduction, in rank order, of the sources of ranks 0..r (scan) or
// 0..r-1 (exscan; rank 0's is left alone, as MPI leaves it undefined).
// Each member's result is a task of its own that reads every source it
// needs, rather than the previous member's result: tasks never read what
// another writes, so they run in any order and on any engine (or member),
// and the rank-order reduction gives the bytes a running prefix would.
// P (P + 1) / 2 reads of n: the price of that independence on one node.
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {
namespace {

void plan_prefix(const LocalArgs &a, LocalPlan *plan, bool inclusive) {
    const uint64_t element = dp_dtype_size(a.dtype);
    std::vector<Piece> in;
    for (uint32_t r = inclusive ? 0 : 1; r < a.size; ++r)
        for_each_chunk(a.count * element, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
            in.clear();
            for (uint32_t m = 0; m < (inclusive ? r + 1 : r); ++m)
                in.push_back({Where::source, m, off});
            const Piece out{Where::destination, r, off};
            plan->add(Task::Kind::reduce, len, in, {&out, 1});
        });
}

}  // namespace

void plan_local_scan(const LocalArgs &a, LocalPlan *plan) { plan_prefix(a, plan, true); }
void plan_local_exscan(const LocalArgs &a, LocalPlan *plan) { plan_prefix(a, plan, false); }

}  // namespace deputy::coll
