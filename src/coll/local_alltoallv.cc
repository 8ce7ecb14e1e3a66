// Alltoallv among the members of one node: block m of member r's source
// (its send[m]) goes to member m's destination at m's recv[r]. The other
// vector collectives (allgatherv, gatherv, scatterv) are these moves too,
// with counts blocks the client derived (collective.h). Alltoallv has no
// in-place form, and the others' give a member's own block no move, so
// every move is independent of the others. Blocks have
// lengths of their own and the pieces of one task share one length, so
// every block is cut in chunks and chunks of equal length are then packed
// together, in the order the pairs come, into tasks of at most chunk_bytes:
// equal counts batch as alltoall's blocks do, uneven ones make one task per
// chunk of a distinct length.
#include <algorithm>
#include <vector>

#include "coll/local_plan.h"
#include "coll/vector_counts.h"

namespace deputy::coll {

void plan_local_alltoallv(const LocalArgs &a, LocalPlan *plan) {
    const std::vector<MemberVector> &v = *a.vectors;
    const uint64_t element = dp_dtype_size(a.dtype);
    struct Move {
        uint64_t len;
        Piece in, out;
    };
    std::vector<Move> moves;
    for (uint32_t r = 0; r < a.size; ++r)
        for (uint32_t m = 0; m < a.size; ++m) {
            const VectorBlock &from = v[r].send[m];
            const VectorBlock &to = v[m].recv[r];  // as many bytes: the agent checked
            for_each_chunk(from.bytes, a.chunk_bytes, element, [&](uint64_t off, uint64_t len) {
                moves.push_back({len,
                                 {Where::source, r, from.offset + off},
                                 {Where::destination, m, to.offset + off}});
            });
        }
    std::stable_sort(moves.begin(), moves.end(),
                     [](const Move &x, const Move &y) { return x.len > y.len; });
    std::vector<Piece> in, out;
    uint64_t len = 0;
    auto flush = [&] {
        if (!in.empty()) plan->add(Task::Kind::move, len, in, out);
        in.clear();
        out.clear();
    };
    for (const Move &mv : moves) {
        if (!in.empty() && (mv.len != len || (in.size() + 1) * len > a.chunk_bytes)) flush();
        len = mv.len;
        in.push_back(mv.in);
        out.push_back(mv.out);
    }
    flush();
}

}  // namespace deputy::coll
