// Bcast among the members of one node: the root's buffer, chunk by chunk,
// to every other member's (a broadcast task per chunk).
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_bcast(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    if (a.size < 2) return;
    std::vector<Piece> out;
    for_each_chunk(a.count * element, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
        const Piece in{Where::source, a.root, off};
        out.clear();
        for (uint32_t r = 0; r < a.size; ++r)
            if (r != a.root) out.push_back({Where::destination, r, off});
        plan->add(Task::Kind::move, len, {&in, 1}, out);
    });
}

}  // namespace deputy::coll
