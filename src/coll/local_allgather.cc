// Allgather among the members of one node: member m's source goes to block
// m of every member's destination, one task per chunk of each source (a
// broadcast of it). In place (member m's source is block m of its own
// destination) the runner skips the copy onto itself.
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_allgather(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    const uint64_t n = a.count * element;
    std::vector<Piece> out(a.size);
    for (uint32_t m = 0; m < a.size; ++m) {
        for_each_chunk(n, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
            const Piece in{Where::source, m, off};
            for (uint32_t r = 0; r < a.size; ++r) out[r] = {Where::destination, r, m * n + off};
            plan->add(Task::Kind::move, len, {&in, 1}, out);
        });
    }
}

}  // namespace deputy::coll
