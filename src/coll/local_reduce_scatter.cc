// Reduce-scatter among the members of one node: block r of every member's
// source, reduced in rank order, is member r's destination. One task per
// chunk of each block.
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_reduce_scatter(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    const uint64_t n = a.count * element;
    std::vector<Piece> in(a.size);
    for (uint32_t r = 0; r < a.size; ++r) {
        for_each_chunk(n, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
            for (uint32_t m = 0; m < a.size; ++m) in[m] = {Where::source, m, r * n + off};
            const Piece out{Where::destination, r, off};
            plan->add(Task::Kind::reduce, len, in, {&out, 1});
        });
    }
}

}  // namespace deputy::coll
