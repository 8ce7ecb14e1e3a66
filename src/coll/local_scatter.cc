// Scatter among the members of one node: block m of the root's source goes
// to member m's destination, one task per chunk. In place at the root (its
// destination is block root of its source) the runner skips the copy onto
// itself.
#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_scatter(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    const uint64_t n = a.count * element;
    for (uint32_t m = 0; m < a.size; ++m)
        for_each_chunk(n, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
            const Piece in{Where::source, a.root, m * n + off};
            const Piece out{Where::destination, m, off};
            plan->add(Task::Kind::move, len, {&in, 1}, {&out, 1});
        });
}

}  // namespace deputy::coll
