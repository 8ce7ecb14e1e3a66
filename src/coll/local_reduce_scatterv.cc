// reduce_scatterv among the members of one node: block r of every member's
// source (its send[r], the same range in every member's: the agent checked
// the layout, coll/vector_counts.h), reduced in rank order, is member r's
// destination. One task per chunk of each block, as reduce_scatter's.
#include <vector>

#include "coll/local_plan.h"
#include "coll/vector_counts.h"

namespace deputy::coll {

void plan_local_reduce_scatterv(const LocalArgs &a, LocalPlan *plan) {
    const std::vector<MemberVector> &v = *a.vectors;
    const uint64_t element = dp_dtype_size(a.dtype);
    std::vector<Piece> in(a.size);
    for (uint32_t r = 0; r < a.size; ++r) {
        const VectorBlock &block = v[r].recv[r];  // its result: [0, +len)
        const uint64_t from = v[r].send[r].offset;
        for_each_chunk(block.bytes, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
            for (uint32_t m = 0; m < a.size; ++m) in[m] = {Where::source, m, from + off};
            const Piece out{Where::destination, r, off};
            plan->add(Task::Kind::reduce, len, in, {&out, 1});
        });
    }
}

}  // namespace deputy::coll
