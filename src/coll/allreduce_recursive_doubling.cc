// Recursive-doubling allreduce: log2(p2) rounds in which partners new_rank
// and new_rank ^ mask (mask = 1, 2, 4, ...) swap their whole vectors and
// both reduce, so after round k every group of 2^k new ranks holds the same
// partial result. Teams that are not a power of two fold first (fold.h).
//
// Latency-optimal (log2 P rounds, plus 2 for a fold) but each round moves the
// whole vector: n * log2(p2) bytes per rank. The selector uses it for small
// messages, where latency dominates.
//
// Both partners compute lower-rank operand op higher-rank operand, so the
// result is bit-identical on every rank even where the operation is only
// commutative up to NaN payloads.
#include "coll/algorithms.h"
#include "coll/fold.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_allreduce_recursive_doubling(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "allreduce_recursive_doubling");
    const int r = args.rank;
    const size_t n = args.count * b.element_bytes();
    const Region result = destination_region(0, n);
    Region current{b.input(), 0, n};  // where this rank's partial result is
    if (args.size == 1) {
        if (!args.in_place) b.copy_pieces(result, current);
        return b.finish();
    }
    b.need_scratch(n);
    const Region landing = scratch_region(0, n);

    const Fold fold(r, args.size);
    if (fold.sits_out()) {
        b.send_pieces(fold.pair_partner(), current);
        b.recv_pieces(fold.pair_partner(), result);
        return b.finish();
    }
    if (fold.in_pair()) {  // the partner is the lower rank
        b.recv_reduce_pieces(fold.pair_partner(), result, current, landing, true);
        current = result;
    }
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
        const int partner = fold.member(fold.new_rank ^ mask);
        b.send_pieces(partner, current);
        b.recv_reduce_pieces(partner, result, current, landing, partner < r);
        current = result;
    }
    if (fold.in_pair()) b.send_pieces(fold.pair_partner(), result);
    return b.finish();
}

}  // namespace deputy::coll
