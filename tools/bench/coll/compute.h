// The "compute" of the OSU overlap method: work the host does while a
// non-blocking collective is in flight, for as long as that collective's
// pure communication time.
//  - cpu: a dummy floating-point kernel on a 25x25 matrix, repeated until
//    the target time has passed (the OSU benchmarks' dummy compute; their
//    DIM is 25 too), so the core is busy exactly as an application's would be;
//  - idle: sleeping until the same deadline, which leaves the core to
//    whatever else needs it (on this 2-core machine: the agent's engines).
// With `calls` > 0 the time is cut into that many equal slices and
// `between` (a dp_test/MPI_Test) runs after each, as OSU's -t does.
#pragma once

#include <time.h>

#include <cstdint>

#include "common/timing.h"

namespace deputy::bench::coll {

class Compute {
  public:
    explicit Compute(bool idle);

    template <typename Between>
    void run(uint64_t ns, uint32_t calls, Between &&between) {
        if (calls == 0) {
            spend(ns);
            return;
        }
        const uint64_t slice = ns / calls;
        for (uint32_t c = 0; c < calls; ++c) {
            spend(slice);
            between();
        }
    }

    bool idle() const { return idle_; }
    // Computes (or sleeps, when idle) for `ns`.
    void spend(uint64_t ns);

  private:
    void kernel();

    bool idle_;
    float a_[25][25];
    float x_[25];
    float y_[25];
};

}  // namespace deputy::bench::coll
