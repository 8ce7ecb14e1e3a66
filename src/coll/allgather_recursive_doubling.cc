// Recursive-doubling allgather: in round mask = 1, 2, ..., p2/2 partners
// new_rank and new_rank ^ mask swap the windows of blocks they have
// gathered so far, so windows double each round and after log2(p2) rounds
// every new rank has everything. Teams that are not a power of two fold
// (fold.h): the even rank of a pair first gives its block to the odd one,
// which then stands for both, and at the end receives the whole result.
//
// Because the ranks a new rank stands for are contiguous, a window of new
// ranks is one contiguous range of the destination and moves as one
// message. Per rank (P - 1) * n bytes for a power of two, in log2(P)
// messages; a fold costs the pair n and P * n more.
#include <algorithm>

#include "coll/algorithms.h"
#include "coll/fold.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_allgather_recursive_doubling(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "allgather_recursive_doubling");
    const int p = args.size;
    const int r = args.rank;
    const size_t nb = args.count * b.element_bytes();
    const Region own_input =
        args.in_place ? destination_region(static_cast<size_t>(r) * nb, nb) : source_region(0, nb);
    const Region everything = destination_region(0, static_cast<size_t>(p) * nb);
    const Fold fold(r, p);
    if (fold.sits_out()) {
        b.send_pieces(fold.pair_partner(), own_input);
        b.recv_pieces(fold.pair_partner(), everything);
        return b.finish();
    }
    if (!args.in_place)
        b.copy_pieces(destination_region(static_cast<size_t>(r) * nb, nb), own_input);
    if (fold.in_pair()) {
        b.recv_pieces(fold.pair_partner(),
                      destination_region(static_cast<size_t>(fold.pair_partner()) * nb, nb));
    }
    // The destination bytes of the blocks new ranks [first, last) stand for.
    const auto window = [&](int first, int last) {
        const auto from = static_cast<size_t>(fold.first_covered(first));
        const auto to = static_cast<size_t>(fold.first_covered(last));
        return destination_region(from * nb, (to - from) * nb);
    };
    int first = fold.new_rank;
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
        const int partner = fold.member(fold.new_rank ^ mask);
        const int partner_first = first ^ mask;  // windows are aligned to their size
        b.send_pieces(partner, window(first, first + mask));
        b.recv_pieces(partner, window(partner_first, partner_first + mask));
        first = std::min(first, partner_first);
    }
    if (fold.in_pair()) b.send_pieces(fold.pair_partner(), everything);
    return b.finish();
}

}  // namespace deputy::coll
