// Binomial-tree broadcast. With ranks renumbered relative to the root
// (v = rank - root mod P), rank v > 0 receives from v minus its lowest set
// bit, then sends to v + m for every power of two m below that bit (all m
// < P for the root), largest subtree first. ceil(log2 P) rounds; a rank sends
// n bytes per child, the root ceil(log2 P) times n.
//
// With chunk_bytes the message moves in pieces and a rank forwards piece k
// as soon as it has it, so the rounds of different pieces overlap.
//
// The message is in the destination buffer on every rank, the root's
// included (MPI_Bcast has one buffer).
#include "coll/algorithms.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_bcast_binomial(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "bcast_binomial");
    const int p = args.size;
    const int v = (args.rank - args.root + p) % p;
    const auto rank_of = [&](int relative) { return (relative + args.root) % p; };
    const Region message = destination_region(0, args.count * b.element_bytes());

    int mask = 1;
    while (mask < p) {
        if ((v & mask) != 0) {
            b.recv_pieces(rank_of(v - mask), message);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask < p) b.send_pieces(rank_of(v + mask), message);
    }
    return b.finish();
}

}  // namespace deputy::coll
