// Pairwise-exchange alltoall: in round s (1..P-1) rank r sends its block for
// r + s and receives the block from r - s. Every rank talks to exactly one
// destination and one source per round, so no receiver is flooded, which is
// why each round starts only once the previous one has completed (an
// explicit dependency: the bytes alone would let all rounds run at once).
// P - 1 messages of n bytes per rank; the block a rank keeps is a local copy.
//
// In place the destination is both the blocks to send and the place for the
// received ones. The block from r - s goes to slot r - s, which is sent to
// r - s in round P - s. When that round is earlier (2s > P) the slot is free
// and the block lands in it directly; otherwise it lands in scratch and is
// copied once the slot has been sent. Receiving directly when 2s <= P would
// make the receive wait for a send the partner can only match after its own
// receive: a deadlock under rendezvous sends.
#include <utility>
#include <vector>

#include "coll/algorithms.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_alltoall_pairwise(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "alltoall_pairwise");
    const int p = args.size;
    const int r = args.rank;
    const size_t nb = args.count * b.element_bytes();
    const BufferId in = b.input();
    const auto slot = [&](BufferId buffer, int i) {
        return Region{buffer, static_cast<size_t>(i) * nb, nb};
    };
    if (nb == 0) return b.finish();  // nothing to move, nothing to wait for
    if (!args.in_place) b.copy(slot(BufferId::destination, r), slot(in, r));
    if (args.in_place) b.need_scratch(static_cast<size_t>(p / 2) * nb);

    std::vector<StepId> previous_round;
    std::vector<std::pair<int, Region>> parked;  // (slot, scratch) copied at the end
    for (int s = 1; s < p; ++s) {
        const int to = (r + s) % p;
        const int from = (r + p - s) % p;
        const StepId sent = b.send(to, slot(in, to), previous_round);
        if (!args.in_place || 2 * s > p) {
            previous_round = {sent,
                              b.recv(from, slot(BufferId::destination, from), previous_round)};
        } else {
            const Region landing = scratch_region(static_cast<size_t>(s - 1) * nb, nb);
            previous_round = {sent, b.recv(from, landing, previous_round)};
            parked.emplace_back(from, landing);
        }
    }
    // Listed after every send, so that each copy waits for the send of the
    // slot it overwrites (a copy listed earlier would make that send carry
    // the received block instead).
    for (const auto &[from, landing] : parked) b.copy(slot(BufferId::destination, from), landing);
    return b.finish();
}

}  // namespace deputy::coll
