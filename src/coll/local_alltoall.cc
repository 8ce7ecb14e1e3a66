// Alltoall among the members of one node: block r of member m's source is
// block m of member r's destination. Tasks go by pairs of members {r, m}:
// one task moves both blocks between them (each read before either is
// written), so the plan is right in place too (src == dst: the two blocks
// swap), and pairs touch disjoint blocks, so they run in any order. Small
// blocks of several pairs share a task up to chunk_bytes.
#include <vector>

#include "coll/local_plan.h"

namespace deputy::coll {

void plan_local_alltoall(const LocalArgs &a, LocalPlan *plan) {
    const uint64_t element = dp_dtype_size(a.dtype);
    const uint64_t n = a.count * element;
    if (n == 0) return;
    std::vector<Piece> in, out;
    uint64_t chunk_len = 0;
    auto flush = [&] {
        if (!in.empty()) plan->add(Task::Kind::move, chunk_len, in, out);
        in.clear();
        out.clear();
    };
    for (uint32_t r = 0; r < a.size; ++r) {
        for (uint32_t m = r; m < a.size; ++m) {
            for_each_chunk(n, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
                // A task holds pieces of one length: start another when it changes.
                const uint64_t moves = r == m ? 1 : 2;
                if (!in.empty() && (len != chunk_len || (in.size() + moves) * len > a.chunk_bytes))
                    flush();
                chunk_len = len;
                in.push_back({Where::source, m, r * n + off});
                out.push_back({Where::destination, r, m * n + off});
                if (r != m) {
                    in.push_back({Where::source, r, m * n + off});
                    out.push_back({Where::destination, m, r * n + off});
                }
            });
        }
    }
    flush();
}

}  // namespace deputy::coll
