// AVX2 compare and compare_pattern: byte-equality masks, four vectors per
// step while the buffers are equal. The last partial vector is handled by
// re-reading the final 32 bytes: everything before i is known equal, so the
// first difference in that overlapping window is the first one overall.
#include <immintrin.h>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

constexpr size_t kVec = 32;

inline __m256i load(const unsigned char *p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}
// Bit k set when byte k of x and y differ.
inline uint32_t differ(__m256i x, __m256i y) {
    return ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, y)));
}

inline __m256i broadcast(uint64_t pattern, size_t phase) {
    const unsigned bits = 8 * (phase % 8);
    const uint64_t rotated = bits == 0 ? pattern : (pattern >> bits) | (pattern << (64 - bits));
    return _mm256_set1_epi64x(static_cast<long long>(rotated));
}

// n >= kVec. b_at(i) gives the 32 expected bytes at offset i (a multiple of
// 32), b_last those of the final window at n - 32.
template <typename Expected>
size_t first_difference(const unsigned char *a, size_t n, Expected b_at, __m256i b_last) {
    size_t i = 0;
    for (; i + 4 * kVec <= n; i += 4 * kVec) {
        const __m256i x0 = _mm256_xor_si256(load(a + i), b_at(i));
        const __m256i x1 = _mm256_xor_si256(load(a + i + kVec), b_at(i + kVec));
        const __m256i x2 = _mm256_xor_si256(load(a + i + 2 * kVec), b_at(i + 2 * kVec));
        const __m256i x3 = _mm256_xor_si256(load(a + i + 3 * kVec), b_at(i + 3 * kVec));
        const __m256i any = _mm256_or_si256(_mm256_or_si256(x0, x1), _mm256_or_si256(x2, x3));
        if (!_mm256_testz_si256(any, any)) break;  // locate it below, one vector at a time
    }
    for (; i + kVec <= n; i += kVec) {
        const uint32_t ne = differ(load(a + i), b_at(i));
        if (ne != 0) return i + static_cast<size_t>(__builtin_ctz(ne));
    }
    if (i == n) return n;
    const uint32_t ne = differ(load(a + n - kVec), b_last);
    return ne != 0 ? n - kVec + static_cast<size_t>(__builtin_ctz(ne)) : n;
}

// Short buffers: one byte at a time (at most 31 bytes).
template <typename ExpectedByte>
size_t first_difference_short(const unsigned char *a, size_t n, ExpectedByte b_at) {
    for (size_t i = 0; i < n; ++i) {
        if (a[i] != b_at(i)) return i;
    }
    return n;
}

size_t compare_avx2(const void *a, const void *b, size_t n) {
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    if (n < kVec) return first_difference_short(pa, n, [pb](size_t i) { return pb[i]; });
    return first_difference(
        pa, n, [pb](size_t i) { return load(pb + i); }, load(pb + n - kVec));
}

size_t compare_pattern_avx2(const void *a, uint64_t pattern, size_t n) {
    const auto *pa = static_cast<const unsigned char *>(a);
    if (n < kVec) {
        return first_difference_short(pa, n, [pattern](size_t i) {
            return static_cast<unsigned char>(pattern >> (8 * (i % 8)));
        });
    }
    // Only the final overlapping window may start mid-pattern.
    const __m256i p = broadcast(pattern, 0);
    return first_difference(
        pa, n, [p](size_t) { return p; }, broadcast(pattern, n - kVec));
}

}  // namespace

void register_compare_avx2(Table &table) {
    table.compare = compare_avx2;
    table.compare_pattern = compare_pattern_avx2;
}

}  // namespace deputy::mover::kernels
