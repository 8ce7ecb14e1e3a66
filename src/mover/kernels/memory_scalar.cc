// Baseline copy/move/fill/dualcast for any CPU of a target. Cached stores
// go through the C library (already tuned per CPU); non-temporal stores use
// what every CPU of the target has: SSE2's MOVNTDQ/MOVNTI on x86-64, the
// Advanced SIMD registers and STNP on aarch64.
#if defined(__x86_64__)
#include <emmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <atomic>
#include <cstring>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

// Below this a non-temporal copy touches too few lines to be worth aligning.
constexpr size_t kMinStream = 256;
// dualcast works in chunks this small so the second read of src hits L1.
constexpr size_t kDualcastChunk = 16 * 1024;

// The target's pieces: 64 bytes stored around the cache, 8 bytes likewise,
// and the fence that orders such stores before the ones that publish them.
#if defined(__x86_64__)
inline void stream_64(char *d, const char *s) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16));
    const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 32));
    const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(d), v0);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 16), v1);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 32), v2);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 48), v3);
}
inline void stream_8(char *d, uint64_t v) {
    _mm_stream_si64(reinterpret_cast<long long *>(d), static_cast<long long>(v));
}
inline void stream_fence() { _mm_sfence(); }
#elif defined(__aarch64__)
// STNP: a pair of 16-byte registers stored with the non-temporal hint.
inline void stream_64(char *d, const char *s) {
    const uint8x16_t v0 = vld1q_u8(reinterpret_cast<const uint8_t *>(s));
    const uint8x16_t v1 = vld1q_u8(reinterpret_cast<const uint8_t *>(s + 16));
    const uint8x16_t v2 = vld1q_u8(reinterpret_cast<const uint8_t *>(s + 32));
    const uint8x16_t v3 = vld1q_u8(reinterpret_cast<const uint8_t *>(s + 48));
    asm volatile("stnp %q0, %q1, [%2]" ::"w"(v0), "w"(v1), "r"(d) : "memory");
    asm volatile("stnp %q0, %q1, [%2, #32]" ::"w"(v2), "w"(v3), "r"(d) : "memory");
}
// STNP stores pairs only; an 8-byte fill store is an ordinary one.
inline void stream_8(char *d, uint64_t v) { std::memcpy(d, &v, 8); }
inline void stream_fence() { asm volatile("dmb ishst" ::: "memory"); }
#else
inline void stream_64(char *d, const char *s) { std::memcpy(d, s, 64); }
inline void stream_8(char *d, uint64_t v) { std::memcpy(d, &v, 8); }
inline void stream_fence() { std::atomic_thread_fence(std::memory_order_release); }
#endif

size_t to_alignment(const void *p, size_t align) {
    return (align - reinterpret_cast<uintptr_t>(p) % align) % align;
}

// Non-overlapping copy with non-temporal stores to the 16-byte-aligned
// middle.
void copy_stream(char *d, const char *s, size_t n) {
    const size_t head = to_alignment(d, 16);
    std::memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) stream_64(d + i, s + i);
    std::memcpy(d + i, s + i, n - i);
}

void copy_scalar(void *dst, const void *src, size_t n, Store store) {
    if (store == Store::cached || n < kMinStream) {
        std::memcpy(dst, src, n);
        return;
    }
    copy_stream(static_cast<char *>(dst), static_cast<const char *>(src), n);
    stream_fence();  // NT stores are weakly ordered: publish them before returning
}

void move_scalar(void *dst, const void *src, size_t n, Store store) {
    char *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    // Streaming is only done for disjoint ranges; an overlapping move has its
    // destination in cache already (it was just read as source).
    const auto da = reinterpret_cast<uintptr_t>(d), sa = reinterpret_cast<uintptr_t>(s);
    const bool disjoint = da + n <= sa || sa + n <= da;
    if (store == Store::cached || n < kMinStream || !disjoint) {
        std::memmove(dst, src, n);
        return;
    }
    copy_stream(d, s, n);
    stream_fence();
}

// Repeats the pattern with 8-byte stores; the byte at offset i is pattern
// byte i % 8 whatever the alignment of dst.
void fill_scalar(void *dst, uint64_t pattern, size_t n, Store store) {
    char *d = static_cast<char *>(dst);
    size_t i = 0;
    if (store == Store::nontemporal && n >= kMinStream) {
        // MOVNTI wants no alignment, but aligned stores fill whole lines.
        const size_t head = to_alignment(d, 8);
        for (; i < head; ++i) d[i] = static_cast<char>(pattern >> (8 * (i % 8)));
        const int rot = static_cast<int>(8 * (head % 8));
        const uint64_t phased = rot == 0 ? pattern : (pattern >> rot) | (pattern << (64 - rot));
        for (; i + 8 <= n; i += 8) stream_8(d + i, phased);
        stream_fence();
    } else {
        for (; i + 8 <= n; i += 8) std::memcpy(d + i, &pattern, 8);
    }
    for (; i < n; ++i) d[i] = static_cast<char>(pattern >> (8 * (i % 8)));
}

void dualcast_scalar(void *dst1, void *dst2, const void *src, size_t n, Store store) {
    char *d1 = static_cast<char *>(dst1);
    char *d2 = static_cast<char *>(dst2);
    const char *s = static_cast<const char *>(src);
    for (size_t i = 0; i < n; i += kDualcastChunk) {
        const size_t len = n - i < kDualcastChunk ? n - i : kDualcastChunk;
        if (store == Store::nontemporal && len >= kMinStream) {
            copy_stream(d1 + i, s + i, len);
            copy_stream(d2 + i, s + i, len);
        } else {
            std::memcpy(d1 + i, s + i, len);
            std::memcpy(d2 + i, s + i, len);
        }
    }
    if (store == Store::nontemporal) stream_fence();
}

}  // namespace

void register_memory_scalar(Table &table) {
    table.copy = copy_scalar;
    table.move = move_scalar;
    table.fill = fill_scalar;
    table.dualcast = dualcast_scalar;
}

}  // namespace deputy::mover::kernels
