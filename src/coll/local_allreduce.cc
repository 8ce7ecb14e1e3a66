// Allreduce among the members of one node, in one pass per chunk: the
// chunk of every member's source, reduced in rank order, written to every
// member's destination. (P-1) reductions and P writes per chunk, nothing
// sent anywhere: the engine reaches every buffer. In place (src == dst) is
// the runner's business: it reads every input before it writes an output.
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_allreduce(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    std::vector<Piece> in(a.size), out(a.size);
    for_each_chunk(a.count * element, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
        for (uint32_t r = 0; r < a.size; ++r) {
            in[r] = {Where::source, r, off};
            out[r] = {Where::destination, r, off};
        }
        plan->add(Task::Kind::reduce, len, in, out);
    });
}

}  // namespace deputy::coll
