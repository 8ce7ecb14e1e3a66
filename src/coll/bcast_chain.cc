// Pipelined chain broadcast: root -> root + 1 -> ... -> root + P - 1, the
// message cut into pieces of chunk_bytes that each rank forwards as soon as
// it has them. With c pieces it takes P - 2 + c piece-times instead of the
// binomial tree's log2(P) message-times, and every rank except the last
// sends exactly n bytes, so for large messages it approaches the time of
// one transfer of n whatever P is. Without chunk_bytes it degenerates into
// P - 1 sequential full transfers: the selector always gives it a chunk size.
//
// The message is in the destination buffer on every rank, the root's
// included.
#include "coll/algorithms.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_bcast_chain(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "bcast_chain");
    const int p = args.size;
    const int v = (args.rank - args.root + p) % p;
    const Region message = destination_region(0, args.count * b.element_bytes());
    if (v > 0) b.recv_pieces((args.rank + p - 1) % p, message);
    if (v < p - 1) b.send_pieces((args.rank + 1) % p, message);
    return b.finish();
}

}  // namespace deputy::coll
