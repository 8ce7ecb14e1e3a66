// Ring allgather: in step s (0..P-2) rank r sends block r - s to r + 1 and
// receives block r - s - 1 from r - 1 into its slot of the destination; the
// block it sends next is the one it just received. P - 1 messages of n bytes
// per rank, neighbours only; with chunk_bytes a rank forwards piece k while
// piece k + 1 arrives.
//
// Out of place, step 0 sends straight from the source, so it does not wait
// for the local copy of the source into the destination.
#include "coll/algorithms.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_allgather_ring(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "allgather_ring");
    const int p = args.size;
    const int r = args.rank;
    const size_t nb = args.count * b.element_bytes();
    const auto slot = [&](int i) {
        return destination_region(static_cast<size_t>(((i % p) + p) % p) * nb, nb);
    };
    const Region own_input = args.in_place ? slot(r) : source_region(0, nb);
    if (!args.in_place) b.copy_pieces(slot(r), own_input);
    const int next = (r + 1) % p;
    const int prev = (r + p - 1) % p;
    for (int s = 0; s < p - 1; ++s) {
        b.send_pieces(next, s == 0 ? own_input : slot(r - s));
        b.recv_pieces(prev, slot(r - s - 1));
    }
    return b.finish();
}

}  // namespace deputy::coll
