#include "bench/coll/compute.h"

#include <sys/prctl.h>

namespace deputy::bench::coll {

Compute::Compute(bool idle) : idle_(idle) {
    for (int i = 0; i < 25; ++i) {
        x_[i] = 1.0f;
        y_[i] = 1.0f;
        for (int j = 0; j < 25; ++j) a_[i][j] = 2.0f;
    }
    // Sleeps of a few microseconds must not be stretched by the default
    // 50 us timer slack.
    if (idle_) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

void Compute::kernel() {
    for (int i = 0; i < 25; ++i) {
        float acc = x_[i];
        for (int j = 0; j < 25; ++j) acc += a_[i][j] * a_[j][i] + y_[j];
        x_[i] = acc;
    }
    // Keep the values bounded and the loop observable.
    asm volatile("" : : "r"(x_) : "memory");
    if (x_[0] > 1e30f)
        for (float &v : x_) v = 1.0f;
}

void Compute::spend(uint64_t ns) {
    const uint64_t end = timing::now_ns() + ns;
    if (idle_) {
        timespec ts{time_t(end / 1000000000ull), long(end % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
        }
        return;
    }
    while (timing::now_ns() < end) kernel();
}

}  // namespace deputy::bench::coll
