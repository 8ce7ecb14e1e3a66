#include "mover/wait.h"

#include <sched.h>

#include "common/cpu_relax.h"
#include "common/futex.h"
#include "common/timing.h"

namespace deputy::mover {
namespace {

constexpr uint32_t kWaiterBit = 0x100;  // the record's `waiter` byte

bool done(const dp_completion_t *record) { return dp_mover_poll(record); }

dp_status_t wait_block(dp_completion_t *record, int64_t timeout_ns, uint64_t start) {
    auto *word = reinterpret_cast<uint32_t *>(record);
    for (;;) {
        uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (seen & 0xffu) return DP_OK;
        // Announce ourselves; if the device published meanwhile the CAS fails
        // and the next load sees the status.
        if (!(seen & kWaiterBit) &&
            !__atomic_compare_exchange_n(word, &seen, seen | kWaiterBit, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        int64_t left = -1;
        if (timeout_ns >= 0) {
            left = timeout_ns - int64_t(timing::now_ns() - start);
            if (left <= 0) return done(record) ? DP_OK : DP_ERR_TIMEOUT;
        }
        // Sleeps only while the word is still "pending + waiter".
        futex_wait(word, seen | kWaiterBit, left);
    }
}

}  // namespace

dp_status_t wait_completion(dp_completion_t *record, dp_wait_mode_t mode, int64_t timeout_ns) {
    if (done(record)) return DP_OK;
    const uint64_t start = timing::now_ns();
    if (mode == DP_WAIT_BLOCK) return wait_block(record, timeout_ns, start);
    // The clock costs more than a plain poll: look at it every 1024 of
    // those, but every 8 pauses (one pause is ~140 cycles on recent Intel
    // cores: 1024 would make a 2 us wait ~50 us) and every yield (one can
    // give the core away for a whole time slice).
    const uint64_t clock_period = mode == DP_WAIT_PAUSE ? 8 : mode == DP_WAIT_YIELD ? 1 : 1024;
    for (uint64_t polls = 1;; ++polls) {
        if (done(record)) return DP_OK;
        if (mode == DP_WAIT_PAUSE) cpu_relax();
        else if (mode == DP_WAIT_YIELD) sched_yield();
        if (timeout_ns >= 0 && polls % clock_period == 0 &&
            int64_t(timing::now_ns() - start) >= timeout_ns)
            return done(record) ? DP_OK : DP_ERR_TIMEOUT;
    }
}

}  // namespace deputy::mover
