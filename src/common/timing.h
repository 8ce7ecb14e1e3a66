// Timing helpers: monotonic nanoseconds, per-thread CPU time, and the
// median/percentile math every benchmark uses.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace deputy::timing {

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// CPU time consumed by the calling thread: with wall time it gives the share
// of a core a waiting thread burned (dsa_perf_micros' "cpu" column).
inline uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline uint64_t process_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// p in [0,1]; nearest-rank on a sorted copy. 0 for an empty sample.
template <typename T>
double percentile(std::vector<T> samples, double p) {
    if (samples.empty()) return 0.0;
    std::sort(samples.begin(), samples.end());
    size_t rank = static_cast<size_t>(p * double(samples.size() - 1) + 0.5);
    return double(samples[std::min(rank, samples.size() - 1)]);
}

template <typename T>
double median(std::vector<T> samples) {
    return percentile(std::move(samples), 0.5);
}

}  // namespace deputy::timing
