// Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an
// allgather by recursive doubling, among p2 new ranks (fold.h for other team
// sizes).
//
// The vector is cut into p2 blocks. Each rank keeps a window of blocks,
// first all of them. In halving round mask = p2/2, ..., 2, 1 partners
// new_rank and new_rank ^ mask split their common window: the one whose
// mask bit is 0 keeps the lower half, the other the upper; each sends the
// half it gives up and reduces the half it keeps with what it receives.
// After log2(p2) rounds new rank i holds the complete block i. The allgather
// retraces the rounds backwards (mask = 1, 2, ..., p2/2): partners swap
// their windows, which double each time.
//
// Each rank sends about 2 (p2 - 1) / p2 * n bytes in 2 log2(p2) messages:
// the ring's bandwidth with recursive doubling's latency. A fold adds a full
// n each way for the ranks of a pair, which is why the selector prefers the
// ring for large vectors on teams that are not a power of two.
#include <algorithm>

#include "coll/algorithms.h"
#include "coll/fold.h"
#include "coll/partition.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_allreduce_rabenseifner(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "allreduce_rabenseifner");
    const int r = args.rank;
    const size_t n = args.count * b.element_bytes();
    const Region result = destination_region(0, n);
    Region current{b.input(), 0, n};
    if (args.size == 1) {
        if (!args.in_place) b.copy_pieces(result, current);
        return b.finish();
    }
    const Fold fold(r, args.size);
    const BlockPartition blocks(args.count, static_cast<size_t>(fold.p2), b.element_bytes());
    const auto window = [&](int first, int last) {
        return blocks.region(current.buffer, static_cast<size_t>(first), static_cast<size_t>(last),
                             0);
    };

    if (fold.sits_out()) {
        b.send_pieces(fold.pair_partner(), current);
        b.recv_pieces(fold.pair_partner(), result);
        return b.finish();
    }
    // The largest message received is the fold's full vector, else the
    // first half-window (BlockPartition puts the larger blocks first).
    b.need_scratch(fold.in_pair() ? n : blocks.bytes(0, static_cast<size_t>(fold.p2 / 2)));
    if (fold.in_pair()) {
        b.recv_reduce_pieces(fold.pair_partner(), result, current, scratch_region(0, n), true);
        current = result;
    }

    int first = 0;
    int last = fold.p2;
    for (int mask = fold.p2 / 2; mask >= 1; mask >>= 1) {
        const int partner = fold.member(fold.new_rank ^ mask);
        const int middle = first + mask;
        const bool keep_upper = (fold.new_rank & mask) != 0;
        const int keep_first = keep_upper ? middle : first;
        const int keep_last = keep_upper ? last : middle;
        b.send_pieces(partner, keep_upper ? window(first, middle) : window(middle, last));
        const Region kept = window(keep_first, keep_last);
        const Region into{BufferId::destination, kept.offset, kept.bytes};
        b.recv_reduce_pieces(partner, into, kept, scratch_region(0, kept.bytes), partner < r);
        current = result;
        first = keep_first;
        last = keep_last;
    }
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
        const int partner = fold.member(fold.new_rank ^ mask);
        const int partner_first = first ^ mask;  // windows are aligned to their size
        b.send_pieces(partner, window(first, last));
        b.recv_pieces(partner, window(partner_first, partner_first + mask));
        first = std::min(first, partner_first);
        last = first + 2 * mask;
    }
    if (fold.in_pair()) b.send_pieces(fold.pair_partner(), result);
    return b.finish();
}

}  // namespace deputy::coll
