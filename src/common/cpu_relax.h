// The hint a spin loop gives the core between two polls: x86's PAUSE, Arm's
// YIELD. Both let an SMT sibling run and save power; neither gives up the
// core (that is sched_yield's job). Nothing on other targets.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace deputy {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

}  // namespace deputy
