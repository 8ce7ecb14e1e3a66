// Reduce among the members of one node: as allreduce, every member's
// source chunk reduced in rank order, written to the root's destination
// only. In place at the root (src == dst) the runner reads every input
// before it writes.
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_reduce(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    std::vector<Piece> in(a.size);
    for_each_chunk(a.count * element, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
        for (uint32_t r = 0; r < a.size; ++r) in[r] = {Where::source, r, off};
        const Piece out{Where::destination, a.root, off};
        plan->add(Task::Kind::reduce, len, in, {&out, 1});
    });
}

}  // namespace deputy::coll
