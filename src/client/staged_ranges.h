// Which bytes a descriptor reads and writes, for staged mode: the client
// must send every source range with the descriptor and accept back exactly
// the ranges it writes. A destination the operation only partly writes
// (accumulating REDUCE, APPLY_DELTA, CREATE_DELTA's record) is also sent, so
// bytes the operation leaves alone come back unchanged.
#pragma once

#include <deputy/mover.h>
#include <deputy/status.h>

#include <cstdint>
#include <vector>

namespace deputy::client {

struct ByteRange {
    uint64_t addr;
    uint64_t len;
};

struct StagedPlan {
    std::vector<ByteRange> send;    // ranges whose bytes go to the agent
    std::vector<ByteRange> writes;  // ranges the agent may return
};

// DP_ERR_UNSUPPORTED for BATCH (members elsewhere in memory) and
// CACHE_FLUSH (the agent cannot flush this host's caches); DP_OK otherwise,
// also for malformed descriptors: the agent checks fields and reports them in
// the record like for any other mode.
dp_status_t plan_staged(const dp_desc_t &desc, StagedPlan *plan);

}  // namespace deputy::client
