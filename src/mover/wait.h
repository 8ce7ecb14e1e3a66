// Waiting for a completion record: spin, pause, yield or block.
#pragma once

#include <deputy/mover.h>

#include <cstdint>

namespace deputy::mover {

// Waits until record->status != 0 or timeout_ns passes (<0: no limit).
// Returns DP_OK or DP_ERR_TIMEOUT. Block mode announces itself in the
// record's waiter byte and sleeps on a futex; publish_completion() wakes it.
dp_status_t wait_completion(dp_completion_t *record, dp_wait_mode_t mode, int64_t timeout_ns);

}  // namespace deputy::mover
