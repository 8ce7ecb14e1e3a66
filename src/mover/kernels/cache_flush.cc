// Cache-line write-back for CACHE_FLUSH. On x86-64 this file is compiled for
// the plain ISA, so each flavour lives in a function with its own target
// attribute and runs only after CPUID said the instruction exists. On
// aarch64 the data-cache maintenance instructions are part of the base ISA
// and Linux lets user space run them.
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <atomic>
#include <cstdint>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

#if defined(__x86_64__)
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

void flush_lines(uintptr_t p, size_t n, bool keep) {
    const Flushers &cpu = flushers();
    const uintptr_t begin = p & ~(kLine - 1);
    if (keep && cpu.clwb) {
        write_back(begin, p + n);
    } else if (cpu.clflushopt) {
        flush_unordered(begin, p + n);
    } else {
        flush_ordered(begin, p + n);
    }
    // CLWB and CLFLUSHOPT are ordered only by fences: the flush is complete
    // once this returns.
    _mm_sfence();
}
#elif defined(__aarch64__)
// The smallest data-cache line of the system (CTR_EL0.DminLine, log2 of
// 4-byte words): stepping by it reaches every line whatever the cache level.
uintptr_t line_bytes() {
    static const uintptr_t bytes = [] {
        uint64_t ctr;
        asm volatile("mrs %0, ctr_el0" : "=r"(ctr));
        return uintptr_t(4) << ((ctr >> 16) & 0xf);
    }();
    return bytes;
}

void flush_lines(uintptr_t p, size_t n, bool keep) {
    const uintptr_t line_size = line_bytes();
    const uintptr_t end = p + n;
    // DC CVAC cleans to the point of coherency and keeps the line (CLWB's
    // job); DC CIVAC also invalidates it (CLFLUSH's).
    if (keep) {
        for (uintptr_t line = p & ~(line_size - 1); line < end; line += line_size)
            asm volatile("dc cvac, %0" ::"r"(line) : "memory");
    } else {
        for (uintptr_t line = p & ~(line_size - 1); line < end; line += line_size)
            asm volatile("dc civac, %0" ::"r"(line) : "memory");
    }
    // Maintenance completes only at a DSB: the flush is done once this returns.
    asm volatile("dsb sy" ::: "memory");
}
#else
// No user-space cache maintenance known here: the stores are made visible
// in order, and CACHE_FLUSH's persistence promise is not kept on this target.
void flush_lines(uintptr_t, size_t, bool) { std::atomic_thread_fence(std::memory_order_seq_cst); }
#endif

}  // namespace

void cache_flush(void *p, size_t n, bool keep) {
    if (n == 0) return;
    flush_lines(reinterpret_cast<uintptr_t>(p), n, keep);
}

}  // namespace deputy::mover::kernels
