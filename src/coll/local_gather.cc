// Gather among the members of one node: member m's source goes to block m
// of the root's destination, one task per chunk. In place at the root (its
// source is block root of its destination) the runner skips the copy onto
// itself.
#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_gather(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    const uint64_t n = a.count * element;
    for (uint32_t m = 0; m < a.size; ++m)
        for_each_chunk(n, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
            const Piece in{Where::source, m, off};
            const Piece out{Where::destination, a.root, m * n + off};
            plan->add(Task::Kind::move, len, {&in, 1}, {&out, 1});
        });
}

}  // namespace deputy::coll
