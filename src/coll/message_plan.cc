#include "coll/message_plan.h"

namespace deputy::coll {

LocalPlan build_message_plan(uint64_t bytes, uint64_t chunk_bytes, Piece from, Piece to) {
    LocalPlan plan;
    plan.dtype = DP_UINT8;
    for_each_chunk(bytes, chunk_bytes, 1, [&](uint64_t off, uint64_t len) {
        Piece in = from, out = to;
        in.offset += off;
        out.offset += off;
        plan.add(Task::Kind::move, len, {&in, 1}, {&out, 1});
    });
    return plan;
}

}  // namespace deputy::coll
