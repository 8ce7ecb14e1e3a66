// Derives a step's dependencies from the bytes it reads and writes.
//
// Builders list steps in program order, the way the algorithm is written on
// paper, and never state "wait for step 12" by hand: for every new step the
// tracker returns the earlier steps it conflicts with, exactly as a processor
// orders loads and stores to the same address:
//   read after write  -> wait for the last writer of each byte read;
//   write after read  -> wait for every reader since that byte's last write;
//   write after write -> wait for the last writer of each byte written.
// Steps on disjoint bytes stay independent, which is where the pipelining of
// chunked schedules comes from. Tracking is per byte range (an interval map
// per buffer), so the cost per step is logarithmic in the number of distinct
// ranges, not linear in the number of earlier steps.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <vector>

#include "coll/region.h"
#include "coll/schedule.h"

namespace deputy::coll {

class DependencyTracker {
  public:
    DependencyTracker();

    // Appends to `deps` the earlier steps `step` must wait for, given what it
    // reads and writes, then records its accesses. Steps must be added in
    // increasing id order. `deps` may receive duplicates.
    void access(StepId step, std::span<const Region> reads, std::span<const Region> writes,
                std::vector<StepId> &deps);

  private:
    static constexpr StepId kNone = ~StepId{0};

    // The bytes [start, end) — start is the map key — last written by
    // `writer` and read since by `readers`.
    struct Span {
        size_t end = 0;
        StepId writer = kNone;
        std::vector<StepId> readers;
    };
    using SpanMap = std::map<size_t, Span>;

    // Makes `at` the start of a span (splitting the one containing it) and
    // returns that span.
    SpanMap::iterator split(SpanMap &map, size_t at);

    SpanMap spans_[kBufferCount];
};

}  // namespace deputy::coll
