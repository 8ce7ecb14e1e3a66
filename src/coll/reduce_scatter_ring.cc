// Ring reduce-scatter with equal blocks (MPI_Reduce_scatter_block): the
// first half of the ring allreduce, arranged so that the block a rank ends
// with is its own.
//
// In step s (0..P-2) rank r sends the partial sum of block r - s - 1 to
// r + 1 and receives the partial sum of block r - s - 2 from r - 1, which it
// reduces with its own input of that block; in the last step that block is
// r itself and the reduction writes the result. Each rank sends (P - 1)
// blocks: (P - 1) / P of its input, in P - 1 messages.
//
// Out of place the input is read-only, so partial sums live in two scratch
// blocks used alternately: a step receives into one while the previous
// step's partial sum, in the other, is still being sent. In place the partial
// sums overwrite the input blocks of the destination, and the last step
// writes the result to the destination's first block as MPI requires.
#include "coll/algorithms.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_reduce_scatter_ring(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "reduce_scatter_ring");
    const int p = args.size;
    const int r = args.rank;
    const size_t nb = args.count * b.element_bytes();
    const BufferId in = b.input();
    const auto block = [&](BufferId buffer, int i) {
        return Region{buffer, static_cast<size_t>(((i % p) + p) % p) * nb, nb};
    };
    const Region result = destination_region(0, nb);
    if (p == 1) {
        if (!args.in_place) b.copy_pieces(result, source_region(0, nb));
        return b.finish();
    }
    const int next = (r + 1) % p;
    const int prev = (r + p - 1) % p;

    b.need_scratch(args.in_place ? nb : 2 * nb);
    Region partial = block(in, r - 1);  // what the next send carries
    for (int s = 0; s < p - 1; ++s) {
        b.send_pieces(next, partial);
        const Region mine = block(in, r - s - 2);
        // Never the scratch the send above reads: with rendezvous sends,
        // receiving into it would wait for a send that completes only once
        // the next rank receives, which waits the same way: a ring deadlock.
        const Region landing =
            scratch_region(args.in_place ? 0 : static_cast<size_t>(s % 2) * nb, nb);
        if (s == p - 2) {
            b.recv_reduce_pieces(prev, result, mine, landing);
        } else if (args.in_place) {
            b.recv_reduce_pieces(prev, mine, mine, landing);
            partial = mine;
        } else {
            b.recv_reduce_pieces(prev, landing, mine, landing);
            partial = landing;
        }
    }
    return b.finish();
}

}  // namespace deputy::coll
