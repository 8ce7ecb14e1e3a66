// The timed loops of `deputy bench mover`: on the mover (submit, keep
// queue_depth units in flight, reap the oldest) and on the calling core.
#pragma once

#include <deputy/mover.h>

#include "bench/mover/options.h"
#include "bench/mover/workload.h"

namespace deputy::bench {

struct RunPlan {
    uint32_t queue_depth = 32;
    dp_wait_mode_t wait = DP_WAIT_SPIN;
    uint32_t wq = 0;
    uint64_t iterations = 0;  // 0 = calibrate to ~kTargetRepeatNs per repeat
    uint32_t repeats = 5;
    bool flush_before_repeat = false;
    bool verify = true;
};

inline constexpr uint64_t kTargetRepeatNs = 250'000'000;

// Both return the medians over plan.repeats timed repeats, after one untimed
// warm-up pass. A mover error (timeout, failed record) ends up in
// result.verify_error with verified = false.
MoverResult run_on_mover(dp_mover_t *mover, Workload &workload, const RunPlan &plan);
MoverResult run_on_cpu(Workload &workload, const RunPlan &plan);

}  // namespace deputy::bench
