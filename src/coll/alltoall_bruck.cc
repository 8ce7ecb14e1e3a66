// Bruck's alltoall: ceil(log2 P) rounds instead of P - 1, for small blocks,
// where per-message latency dominates, at the price of moving each block
// several times and of local copies.
//
//  1. Rotate: work[i] = input block (r + i) mod P, the block for rank r + i.
//  2. Round k = 1, 2, 4, ... < P: send every work[i] whose index has bit k
//     set to rank r + k, and receive the same indices from r - k into work.
//     A block at index i thus travels i ranks in total (i's binary digits),
//     landing at its destination; the block at index i of rank d then came
//     from rank d - i.
//  3. Unrotate: destination block (r - i) mod P = work[i].
//
// The blocks of a round are not contiguous in work, so they are packed into
// one scratch area for the send and unpacked from another after the
// receive (one message per round). Scratch: P blocks of work plus two
// areas of ceil(P/2) blocks. Bytes sent per rank: n times the number of
// (i, k) with bit k of i set, about n * P/2 * log2 P.
#include "coll/algorithms.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_alltoall_bruck(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "alltoall_bruck");
    const int p = args.size;
    const int r = args.rank;
    const size_t nb = args.count * b.element_bytes();
    if (nb == 0) return b.finish();
    const BufferId in = b.input();
    const auto pz = static_cast<size_t>(p);
    const size_t half = (pz + 1) / 2;
    const Region work{BufferId::scratch, 0, pz * nb};
    const Region packed{BufferId::scratch, pz * nb, half * nb};
    const Region unpacked{BufferId::scratch, (pz + half) * nb, half * nb};
    const auto block = [nb](Region area, size_t i) { return area.sub(i * nb, nb); };
    b.need_scratch((pz + 2 * half) * nb);

    // Rotation as two contiguous copies: input [r, P) then [0, r).
    const auto rz = static_cast<size_t>(r);
    b.copy(work.sub(0, (pz - rz) * nb), Region{in, rz * nb, (pz - rz) * nb});
    if (r > 0) b.copy(work.sub((pz - rz) * nb, rz * nb), Region{in, 0, rz * nb});

    for (int k = 1; k < p; k <<= 1) {
        size_t moved = 0;
        for (int i = 1; i < p; ++i) {
            if ((i & k) != 0) b.copy(block(packed, moved++), block(work, static_cast<size_t>(i)));
        }
        b.send((r + k) % p, packed.sub(0, moved * nb));
        b.recv((r + p - k) % p, unpacked.sub(0, moved * nb));
        moved = 0;
        for (int i = 1; i < p; ++i) {
            if ((i & k) != 0) b.copy(block(work, static_cast<size_t>(i)), block(unpacked, moved++));
        }
    }
    for (int i = 0; i < p; ++i) {
        b.copy(
            block(Region{BufferId::destination, 0, pz * nb}, static_cast<size_t>((r - i + p) % p)),
            block(work, static_cast<size_t>(i)));
    }
    return b.finish();
}

}  // namespace deputy::coll
