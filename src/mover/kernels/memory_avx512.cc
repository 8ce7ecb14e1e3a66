// AVX-512 copy/move/fill/dualcast. The middle of the destination is written
// with aligned 64-byte stores (MOVNTDQ when streaming, so whole lines bypass
// the cache); the unaligned head and tail use byte-masked stores, so no byte
// is written twice and no line is read for ownership needlessly.
#include <immintrin.h>

#include <cstring>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

constexpr size_t kVec = 64;
// Below this the C library's copy (masked or overlapping small moves) wins.
constexpr size_t kMinLoop = 256;

inline __m512i load(const char *p) {
    return _mm512_loadu_si512(p);
}

template <bool kStream>
inline void store_aligned(char *p, __m512i v) {
    if constexpr (kStream) {
        _mm512_stream_si512(reinterpret_cast<__m512i *>(p), v);
    } else {
        _mm512_store_si512(p, v);
    }
}

// Masks of the low / high `bytes` bytes of a vector (bytes <= 64).
inline __mmask64 low_mask(size_t bytes) {
    return bytes >= 64 ? ~0ull : (1ull << bytes) - 1;
}
inline __mmask64 high_mask(size_t bytes) {
    return bytes == 0 ? 0 : ~0ull << (64 - bytes);
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
    const __m512i first = load(s);
    const __m512i last = load(s + n - kVec);
    const size_t head = to_alignment(d);
    size_t i = head;
    for (; i + 4 * kVec <= n; i += 4 * kVec) {
        const __m512i v0 = load(s + i), v1 = load(s + i + kVec);
        const __m512i v2 = load(s + i + 2 * kVec), v3 = load(s + i + 3 * kVec);
        store_aligned<kStream>(d + i, v0);
        store_aligned<kStream>(d + i + kVec, v1);
        store_aligned<kStream>(d + i + 2 * kVec, v2);
        store_aligned<kStream>(d + i + 3 * kVec, v3);
    }
    for (; i + kVec <= n; i += kVec) store_aligned<kStream>(d + i, load(s + i));
    _mm512_mask_storeu_epi8(d + n - kVec, high_mask(n - i), last);
    _mm512_mask_storeu_epi8(d, low_mask(head), first);
}

// The mirror image, for dst > src overlapping: from the end down, so every
// store lands above source bytes still to be read.
template <bool kStream>
void backward(char *d, const char *s, size_t n) {
    const __m512i first = load(s);
    const __m512i last = load(s + n - kVec);
    const size_t end = n - reinterpret_cast<uintptr_t>(d + n) % kVec;  // d + end is aligned
    size_t i = end;
    for (; i >= 4 * kVec; i -= 4 * kVec) {
        const size_t j = i - 4 * kVec;
        const __m512i v0 = load(s + j), v1 = load(s + j + kVec);
        const __m512i v2 = load(s + j + 2 * kVec), v3 = load(s + j + 3 * kVec);
        store_aligned<kStream>(d + j, v0);
        store_aligned<kStream>(d + j + kVec, v1);
        store_aligned<kStream>(d + j + 2 * kVec, v2);
        store_aligned<kStream>(d + j + 3 * kVec, v3);
    }
    for (; i >= kVec; i -= kVec) store_aligned<kStream>(d + i - kVec, load(s + i - kVec));
    _mm512_mask_storeu_epi8(d, low_mask(i), first);
    _mm512_mask_storeu_epi8(d + n - kVec, high_mask(n - end), last);
}

void copy_avx512(void *dst, const void *src, size_t n, Store store) {
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

void move_avx512(void *dst, const void *src, size_t n, Store store) {
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

inline uint64_t rotate_right(uint64_t x, unsigned bits) {
    bits %= 64;
    return bits == 0 ? x : (x >> bits) | (x << (64 - bits));
}

template <bool kStream>
void fill_aligned(char *d, uint64_t pattern, size_t n) {
    const size_t head = to_alignment(d);
    if (n < head + kVec) {  // no whole aligned vector: masked stores only
        const __m512i v = _mm512_set1_epi64(static_cast<long long>(pattern));
        for (size_t i = 0; i < n; i += kVec) _mm512_mask_storeu_epi8(d + i, low_mask(n - i), v);
        return;
    }
    _mm512_mask_storeu_epi8(d, low_mask(head), _mm512_set1_epi64(static_cast<long long>(pattern)));
    // From d + head on, byte j of each vector is pattern byte (head + j) % 8.
    const __m512i v =
        _mm512_set1_epi64(static_cast<long long>(rotate_right(pattern, 8 * (head % 8))));
    size_t i = head;
    for (; i + 4 * kVec <= n; i += 4 * kVec) {
        store_aligned<kStream>(d + i, v);
        store_aligned<kStream>(d + i + kVec, v);
        store_aligned<kStream>(d + i + 2 * kVec, v);
        store_aligned<kStream>(d + i + 3 * kVec, v);
    }
    for (; i + kVec <= n; i += kVec) store_aligned<kStream>(d + i, v);
    _mm512_mask_storeu_epi8(d + i, low_mask(n - i), v);
}

void fill_avx512(void *dst, uint64_t pattern, size_t n, Store store) {
    char *d = static_cast<char *>(dst);
    if (store == Store::nontemporal && n >= kMinLoop) {
        fill_aligned<true>(d, pattern, n);
        _mm_sfence();
    } else {
        fill_aligned<false>(d, pattern, n);
    }
}

// One load of src feeds both destinations. Streaming needs both aligned,
// which only happens when they share an offset within a line; otherwise dst2
// gets unaligned regular stores.
template <bool kStream>
void dualcast_loop(char *d1, char *d2, const char *s, size_t n) {
    const size_t head = to_alignment(d1);
    const bool same_phase =
        (reinterpret_cast<uintptr_t>(d1) - reinterpret_cast<uintptr_t>(d2)) % kVec == 0;
    const __m512i first = load(s);
    const __m512i last = load(s + n - kVec);
    size_t i = head;
    for (; i + kVec <= n; i += kVec) {
        const __m512i v = load(s + i);
        store_aligned<kStream>(d1 + i, v);
        if (kStream && same_phase) {
            store_aligned<kStream>(d2 + i, v);
        } else {
            _mm512_storeu_si512(d2 + i, v);
        }
    }
    _mm512_mask_storeu_epi8(d1, low_mask(head), first);
    _mm512_mask_storeu_epi8(d2, low_mask(head), first);
    _mm512_mask_storeu_epi8(d1 + n - kVec, high_mask(n - i), last);
    _mm512_mask_storeu_epi8(d2 + n - kVec, high_mask(n - i), last);
}

void dualcast_avx512(void *dst1, void *dst2, const void *src, size_t n, Store store) {
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

void register_memory_avx512(Table &table) {
    table.copy = copy_avx512;
    table.move = move_avx512;
    table.fill = fill_avx512;
    table.dualcast = dualcast_avx512;
}

}  // namespace deputy::mover::kernels
