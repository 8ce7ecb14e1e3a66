// AVX-512 compare and compare_pattern: byte-compare masks, four vectors per
// step while the buffers are equal, and a masked load for the last partial
// vector (masked-off bytes are never read, so no fault past the end).
#include <immintrin.h>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

constexpr size_t kVec = 64;

inline __m512i load(const unsigned char *p) {
    return _mm512_loadu_si512(p);
}
inline size_t first_set(__mmask64 m) {
    return static_cast<size_t>(__builtin_ctzll(m));
}

// Finds the first difference of a against the expected bytes: b_at(i) gives
// the 64 at offset i (a multiple of 64, so a pattern needs no rotation),
// b_tail(i, valid) the `valid` ones of the last partial vector.
template <typename Expected, typename ExpectedTail>
size_t first_difference(const unsigned char *a, size_t n, Expected b_at, ExpectedTail b_tail) {
    size_t i = 0;
    for (; i + 4 * kVec <= n; i += 4 * kVec) {
        const __m512i x0 = _mm512_xor_si512(load(a + i), b_at(i));
        const __m512i x1 = _mm512_xor_si512(load(a + i + kVec), b_at(i + kVec));
        const __m512i x2 = _mm512_xor_si512(load(a + i + 2 * kVec), b_at(i + 2 * kVec));
        const __m512i x3 = _mm512_xor_si512(load(a + i + 3 * kVec), b_at(i + 3 * kVec));
        const __m512i any = _mm512_or_si512(_mm512_or_si512(x0, x1), _mm512_or_si512(x2, x3));
        if (_mm512_test_epi64_mask(any, any) != 0) break;  // locate it below, one vector at a time
    }
    for (; i + kVec <= n; i += kVec) {
        const __mmask64 ne = _mm512_cmpneq_epi8_mask(load(a + i), b_at(i));
        if (ne != 0) return i + first_set(ne);
    }
    if (i == n) return n;
    const __mmask64 valid = (1ull << (n - i)) - 1;
    const __mmask64 ne = _mm512_mask_cmpneq_epi8_mask(valid, _mm512_maskz_loadu_epi8(valid, a + i),
                                                      b_tail(i, valid));
    return ne != 0 ? i + first_set(ne) : n;
}

size_t compare_avx512(const void *a, const void *b, size_t n) {
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    return first_difference(
        pa, n, [pb](size_t i) { return load(pb + i); },
        [pb](size_t i, __mmask64 valid) { return _mm512_maskz_loadu_epi8(valid, pb + i); });
}

size_t compare_pattern_avx512(const void *a, uint64_t pattern, size_t n) {
    const __m512i p = _mm512_set1_epi64(static_cast<long long>(pattern));
    return first_difference(
        static_cast<const unsigned char *>(a), n, [p](size_t) { return p; },
        [p](size_t, __mmask64) { return p; });
}

}  // namespace

void register_compare_avx512(Table &table) {
    table.compare = compare_avx512;
    table.compare_pattern = compare_pattern_avx512;
}

}  // namespace deputy::mover::kernels
