// CPUID-based choice of kernel tables and the public entry points that call
// through them (see dispatch.h for how the tables are built).
#include "mover/kernels/dispatch.h"

#include <atomic>

#if DEPUTY_KERNELS_AVX
#include <cpuid.h>
#endif

namespace deputy::mover::kernels {
namespace {

#if DEPUTY_KERNELS_AVX
// AVX-512 kernels use F, BW (byte/word masks), VL and DQ (64-bit multiply);
// both SIMD levels use F16C for float16. __builtin_cpu_supports also checks
// that the OS saves the wider registers (XCR0), so a kernel never runs where
// its registers would be lost on a context switch.
// F16C by CPUID: clang's __builtin_cpu_supports does not know the name
// (the fuzz build compiles these kernels with clang).
bool has_f16c() {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

Isa detect() {
    __builtin_cpu_init();  // may run from a static constructor before libgcc's
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      has_f16c() && __builtin_cpu_supports("bmi2");
    if (!avx2) return Isa::scalar;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? Isa::avx512 : Isa::avx2;
}
#else
Isa detect() { return Isa::scalar; }
#endif

struct Tables {
    Table by_isa[3];

    // A level the CPU lacks keeps a copy of the level below (force_isa()
    // never selects it anyway). Its register functions are not even called:
    // they are compiled for their ISA too, and the compiler uses vector
    // stores to fill the table.
    Tables() {
        const int best = static_cast<int>(detected_isa());
        Table &scalar = by_isa[static_cast<int>(Isa::scalar)];
        register_memory_scalar(scalar);
        register_compare_scalar(scalar);
        register_reduce_scalar(scalar);
        Table &avx2 = by_isa[static_cast<int>(Isa::avx2)];
        avx2 = scalar;
        Table &avx512 = by_isa[static_cast<int>(Isa::avx512)];
#if DEPUTY_KERNELS_AVX
        if (best >= static_cast<int>(Isa::avx2)) {
            register_memory_avx2(avx2);
            register_compare_avx2(avx2);
            register_reduce_avx2(avx2);
        }
        avx512 = avx2;
        if (best >= static_cast<int>(Isa::avx512)) {
            register_memory_avx512(avx512);
            register_compare_avx512(avx512);
            register_reduce_avx512(avx512);
        }
#else
        (void)best;
        avx512 = avx2;
#endif
    }
};

// Constant-initialised to null, so kernels called from other static
// constructors still work: the first call resolves the table.
std::atomic<const Table *> g_active{nullptr};
std::atomic<Isa> g_active_isa{Isa::scalar};

const Tables &tables() {
    static const Tables instance;
    return instance;
}

void activate(Isa isa) {
    g_active_isa.store(isa, std::memory_order_relaxed);
    g_active.store(&tables().by_isa[static_cast<int>(isa)], std::memory_order_release);
}

[[gnu::noinline]] const Table &resolve() {
    // Concurrent first calls all store the same pointer; a force_isa() racing
    // with a first call is excluded by force_isa's contract.
    activate(detected_isa());
    return *g_active.load(std::memory_order_acquire);
}

inline const Table &table() {
    const Table *t = g_active.load(std::memory_order_acquire);
    if (t == nullptr) [[unlikely]] {
        return resolve();
    }
    return *t;
}

}  // namespace

Isa detected_isa() {
    static const Isa isa = detect();
    return isa;
}

Isa active_isa() {
    table();  // resolves the default on first use
    return g_active_isa.load(std::memory_order_relaxed);
}

void force_isa(Isa isa) {
    const Isa best = detected_isa();
    activate(static_cast<int>(isa) > static_cast<int>(best) ? best : isa);
}

const char *isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar:
            return "scalar";
        case Isa::avx2:
            return "avx2";
        case Isa::avx512:
            return "avx512";
    }
    return "unknown";
}

void copy(void *dst, const void *src, size_t n, Store store) {
    table().copy(dst, src, n, store);
}

void move(void *dst, const void *src, size_t n, Store store) {
    table().move(dst, src, n, store);
}

void fill(void *dst, uint64_t pattern, size_t n, Store store) {
    table().fill(dst, pattern, n, store);
}

size_t compare(const void *a, const void *b, size_t n) {
    return table().compare(a, b, n);
}

size_t compare_pattern(const void *a, uint64_t pattern, size_t n) {
    return table().compare_pattern(a, pattern, n);
}

void dualcast(void *dst1, void *dst2, const void *src, size_t n, Store store) {
    table().dualcast(dst1, dst2, src, n, store);
}

void reduce(void *dst, const void *a, const void *b, size_t count, dp_dtype_t dtype, dp_op_t op) {
    table().reduce[dtype][op](dst, a, b, count);
}

}  // namespace deputy::mover::kernels
