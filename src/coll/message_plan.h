// A point-to-point message as a plan of the one-node kind (local_plan.h):
// its bytes from one piece to another (the sender's buffer, the agent's
// copy of an early message, the receiver's buffer), in move tasks of at
// most chunk_bytes, so that several engines share a large message and
// other work interleaves with it. The agent runs it as it runs a
// collective's plan (agent/coll_tasks.h).
#pragma once

#include <cstdint>

#include "coll/local_plan.h"

namespace deputy::coll {

LocalPlan build_message_plan(uint64_t bytes, uint64_t chunk_bytes, Piece from, Piece to);

}  // namespace deputy::coll
