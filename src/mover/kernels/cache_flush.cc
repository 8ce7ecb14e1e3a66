// Cache-line write-back for CACHE_FLUSH. This file is compiled for plain
// x86-64, so each flavour lives in a function with its own target attribute
// and runs only after CPUID said the instruction exists.
#include <cpuid.h>
#include <immintrin.h>

#include <cstdint>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

constexpr uintptr_t kLine = 64;

struct Flushers {
    bool clwb = false;
    bool clflushopt = false;

    Flushers() {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
            clflushopt = (ebx & (1u << 23)) != 0;
            clwb = (ebx & (1u << 24)) != 0;
        }
    }
};

const Flushers &flushers() {
    static const Flushers instance;
    return instance;
}

// CLWB writes the line back and may keep it cached: the data stays readable
// at cache speed.
__attribute__((target("clwb"))) void write_back(uintptr_t line, uintptr_t end) {
    for (; line < end; line += kLine) _mm_clwb(reinterpret_cast<void *>(line));
}

// CLFLUSHOPT writes back and evicts, and unlike CLFLUSH the flushes of
// different lines are not ordered with each other, so they overlap.
__attribute__((target("clflushopt"))) void flush_unordered(uintptr_t line, uintptr_t end) {
    for (; line < end; line += kLine) _mm_clflushopt(reinterpret_cast<void *>(line));
}

void flush_ordered(uintptr_t line, uintptr_t end) {
    for (; line < end; line += kLine) _mm_clflush(reinterpret_cast<void *>(line));
}

}  // namespace

void cache_flush(void *p, size_t n, bool keep) {
    if (n == 0) return;
    const Flushers &cpu = flushers();
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(kLine - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
    if (keep && cpu.clwb) {
        write_back(begin, end);
    } else if (cpu.clflushopt) {
        flush_unordered(begin, end);
    } else {
        flush_ordered(begin, end);
    }
    // CLWB and CLFLUSHOPT are ordered only by fences: the flush is complete
    // once this returns.
    _mm_sfence();
}

}  // namespace deputy::mover::kernels
