// AVX2 copy/move/fill/dualcast. The middle of the destination is written with
// aligned 32-byte stores (VMOVNTDQ when streaming); the unaligned head and
// tail are single overlapping unaligned stores of values loaded up front.
#include <immintrin.h>

#include <cstring>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

constexpr size_t kVec = 32;
// Below this the C library's copy (overlapping small moves) wins.
constexpr size_t kMinLoop = 256;

inline __m256i load(const char *p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}
inline void store_unaligned(char *p, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v);
}

template <bool kStream>
inline void store_aligned(char *p, __m256i v) {
    if constexpr (kStream) {
        _mm256_stream_si256(reinterpret_cast<__m256i *>(p), v);
    } else {
        _mm256_store_si256(reinterpret_cast<__m256i *>(p), v);
    }
}

inline size_t to_alignment(const void *p) {
    return (kVec - reinterpret_cast<uintptr_t>(p) % kVec) % kVec;
}

// n >= kMinLoop. The first and last vectors of src are loaded before any
// store and stored last, and each loop step loads before it stores, so every
// store lands at or below source bytes already read: this is also a correct
// move when dst < src.
template <bool kStream>
void forward(char *d, const char *s, size_t n) {
    const __m256i first = load(s);
    const __m256i last = load(s + n - kVec);
    size_t i = to_alignment(d);
    for (; i + 4 * kVec <= n; i += 4 * kVec) {
        const __m256i v0 = load(s + i), v1 = load(s + i + kVec);
        const __m256i v2 = load(s + i + 2 * kVec), v3 = load(s + i + 3 * kVec);
        store_aligned<kStream>(d + i, v0);
        store_aligned<kStream>(d + i + kVec, v1);
        store_aligned<kStream>(d + i + 2 * kVec, v2);
        store_aligned<kStream>(d + i + 3 * kVec, v3);
    }
    for (; i + kVec <= n; i += kVec) store_aligned<kStream>(d + i, load(s + i));
    store_unaligned(d + n - kVec, last);
    store_unaligned(d, first);
}

// The mirror image, for dst > src overlapping: from the end down, so every
// store lands above source bytes still to be read.
template <bool kStream>
void backward(char *d, const char *s, size_t n) {
    const __m256i first = load(s);
    const __m256i last = load(s + n - kVec);
    size_t i = n - reinterpret_cast<uintptr_t>(d + n) % kVec;  // d + i is aligned
    for (; i >= 4 * kVec; i -= 4 * kVec) {
        const size_t j = i - 4 * kVec;
        const __m256i v0 = load(s + j), v1 = load(s + j + kVec);
        const __m256i v2 = load(s + j + 2 * kVec), v3 = load(s + j + 3 * kVec);
        store_aligned<kStream>(d + j, v0);
        store_aligned<kStream>(d + j + kVec, v1);
        store_aligned<kStream>(d + j + 2 * kVec, v2);
        store_aligned<kStream>(d + j + 3 * kVec, v3);
    }
    for (; i >= kVec; i -= kVec) store_aligned<kStream>(d + i - kVec, load(s + i - kVec));
    store_unaligned(d, first);
    store_unaligned(d + n - kVec, last);
}

void copy_avx2(void *dst, const void *src, size_t n, Store store) {
    char *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    if (n < kMinLoop) {
        std::memcpy(d, s, n);
    } else if (store == Store::nontemporal) {
        forward<true>(d, s, n);
        _mm_sfence();  // NT stores are weakly ordered: publish them before returning
    } else {
        forward<false>(d, s, n);
    }
}

void move_avx2(void *dst, const void *src, size_t n, Store store) {
    char *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    if (n < kMinLoop) {
        std::memmove(d, s, n);
        return;
    }
    // Unsigned difference: dst inside (src, src + n) needs the backward copy.
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(d) - reinterpret_cast<uintptr_t>(s);
    const bool backwards = ahead != 0 && ahead < n;
    if (store == Store::nontemporal) {
        backwards ? backward<true>(d, s, n) : forward<true>(d, s, n);
        _mm_sfence();
    } else {
        backwards ? backward<false>(d, s, n) : forward<false>(d, s, n);
    }
}

inline __m256i broadcast(uint64_t pattern, size_t phase) {
    const unsigned bits = 8 * (phase % 8);
    const uint64_t rotated = bits == 0 ? pattern : (pattern >> bits) | (pattern << (64 - bits));
    return _mm256_set1_epi64x(static_cast<long long>(rotated));
}

// n >= 2 * kVec. A vector stored at offset i must start with pattern byte
// i % 8, hence the rotated broadcasts.
template <bool kStream>
void fill_loop(char *d, uint64_t pattern, size_t n) {
    size_t i = to_alignment(d);
    const __m256i v = broadcast(pattern, i);
    for (; i + 4 * kVec <= n; i += 4 * kVec) {
        store_aligned<kStream>(d + i, v);
        store_aligned<kStream>(d + i + kVec, v);
        store_aligned<kStream>(d + i + 2 * kVec, v);
        store_aligned<kStream>(d + i + 3 * kVec, v);
    }
    for (; i + kVec <= n; i += kVec) store_aligned<kStream>(d + i, v);
    store_unaligned(d, broadcast(pattern, 0));
    store_unaligned(d + n - kVec, broadcast(pattern, n - kVec));
}

void fill_avx2(void *dst, uint64_t pattern, size_t n, Store store) {
    char *d = static_cast<char *>(dst);
    if (n < 2 * kVec) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) std::memcpy(d + i, &pattern, 8);
        std::memcpy(d + i, &pattern, n - i);  // the cut last repeat starts at byte 0
    } else if (store == Store::nontemporal && n >= kMinLoop) {
        fill_loop<true>(d, pattern, n);
        _mm_sfence();
    } else {
        fill_loop<false>(d, pattern, n);
    }
}

// One load of src feeds both destinations. Streaming needs both aligned,
// which only happens when they share an offset within 32 bytes; otherwise
// dst2 gets unaligned regular stores.
template <bool kStream>
void dualcast_loop(char *d1, char *d2, const char *s, size_t n) {
    const bool same_phase =
        (reinterpret_cast<uintptr_t>(d1) - reinterpret_cast<uintptr_t>(d2)) % kVec == 0;
    const __m256i first = load(s);
    const __m256i last = load(s + n - kVec);
    size_t i = to_alignment(d1);
    for (; i + kVec <= n; i += kVec) {
        const __m256i v = load(s + i);
        store_aligned<kStream>(d1 + i, v);
        if (kStream && same_phase) {
            store_aligned<kStream>(d2 + i, v);
        } else {
            store_unaligned(d2 + i, v);
        }
    }
    store_unaligned(d1, first);
    store_unaligned(d2, first);
    store_unaligned(d1 + n - kVec, last);
    store_unaligned(d2 + n - kVec, last);
}

void dualcast_avx2(void *dst1, void *dst2, const void *src, size_t n, Store store) {
    char *d1 = static_cast<char *>(dst1);
    char *d2 = static_cast<char *>(dst2);
    const char *s = static_cast<const char *>(src);
    if (n < kMinLoop) {
        std::memcpy(d1, s, n);
        std::memcpy(d2, s, n);
    } else if (store == Store::nontemporal) {
        dualcast_loop<true>(d1, d2, s, n);
        _mm_sfence();
    } else {
        dualcast_loop<false>(d1, d2, s, n);
    }
}

}  // namespace

void register_memory_avx2(Table &table) {
    table.copy = copy_avx2;
    table.move = move_avx2;
    table.fill = fill_avx2;
    table.dualcast = dualcast_avx2;
}

}  // namespace deputy::mover::kernels
