// Ring allreduce: a reduce-scatter then an allgather around the ring
// rank -> rank + 1 (the classic bandwidth-optimal ring, as the ring baseline
// of `deputy bench coll` runs it on MPI point-to-point).
//
// The vector is cut into P blocks (BlockPartition: sizes differ by at most
// one element, so any count works, including count < P where some blocks are
// empty and their messages are skipped on both sides). In reduce-scatter
// step s (0..P-2) rank r sends block r - s to r + 1 and receives block
// r - s - 1 from r - 1, which it reduces with its own input into the
// destination; the block it sends next is the one it just reduced. After
// P - 1 steps rank r holds the complete block r + 1. In allgather step s it
// sends block r + 1 - s and receives block r - s, straight into the
// destination.
//
// Every rank sends 2 (P - 1) messages of n / P bytes: the bandwidth-optimal
// 2 (P - 1) / P * n, with 2 (P - 1) latencies. Neighbour-only traffic, and
// with chunk_bytes each block moves in pieces, so a rank reduces piece k
// while piece k + 1 arrives.
#include "coll/algorithms.h"
#include "coll/partition.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_allreduce_ring(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "allreduce_ring");
    const int p = args.size;
    const int r = args.rank;
    const BufferId in = b.input();
    const BlockPartition blocks(args.count, static_cast<size_t>(p), b.element_bytes());
    const size_t n = args.count * b.element_bytes();
    if (p == 1) {
        if (!args.in_place) b.copy_pieces(destination_region(0, n), source_region(0, n));
        return b.finish();
    }
    const int next = (r + 1) % p;
    const int prev = (r + p - 1) % p;
    const auto block = [p](int i) { return static_cast<size_t>(((i % p) + p) % p); };

    // One block of scratch receives the partner's partial sums; piece k of a
    // step can land as soon as piece k of the previous step is reduced.
    b.need_scratch(blocks.largest_bytes());
    for (int s = 0; s < p - 1; ++s) {
        const size_t out = block(r - s);
        const size_t got = block(r - s - 1);
        // Step 0 sends this rank's own input; later steps send the partial
        // sum they reduced one step before.
        b.send_pieces(next, blocks.region(s == 0 ? in : BufferId::destination, out));
        b.recv_reduce_pieces(prev, blocks.region(BufferId::destination, got),
                             blocks.region(in, got), scratch_region(0, blocks.bytes(got)));
    }
    for (int s = 0; s < p - 1; ++s) {
        b.send_pieces(next, blocks.region(BufferId::destination, block(r + 1 - s)));
        b.recv_pieces(prev, blocks.region(BufferId::destination, block(r - s)));
    }
    return b.finish();
}

}  // namespace deputy::coll
