// Dissemination barrier: in round k = 1, 2, 4, ... < P rank r sends a token
// to r + k and receives one from r - k. Both wait for round k/2's receive,
// so the receives form a chain and after round k a rank has heard, directly
// or not, from the 2k - 1 ranks before it; after ceil(log2 P) rounds from
// everyone: no rank leaves before every rank has arrived. (Chaining only the
// sends is not enough: a send would then carry what its rank heard in the
// previous round but not in the rounds before, and for P = 6 rank 0 could
// leave before rank 1 arrived.) Tokens carry no bytes, so the ordering is
// stated explicitly (the dependency tracker only sees bytes).
#include "coll/algorithms.h"
#include "coll/schedule_builder.h"

namespace deputy::coll {

Schedule build_barrier_dissemination(const CollectiveArgs &args) {
    ScheduleBuilder b(args, "barrier_dissemination");
    const int p = args.size;
    const int r = args.rank;
    StepId heard[1];
    std::span<const StepId> after;  // nothing before the first round
    for (int k = 1; k < p; k <<= 1) {
        b.send((r + k) % p, Region{}, after);
        heard[0] = b.recv((r + p - k) % p, Region{}, after);
        after = heard;
    }
    return b.finish();
}

}  // namespace deputy::coll
