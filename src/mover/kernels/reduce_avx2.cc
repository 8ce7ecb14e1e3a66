// AVX2 reduction for every numeric dtype x op (the pairs' MINLOC / MAXLOC
// stay scalar), one vector per step and the scalar
// kernel for the last partial vector. Each sequence below computes exactly
// the scalar definition in reduce_scalar.cc; where AVX2 lacks an instruction
// (64-bit multiply and min/max, byte multiply) it is built from 32-bit and
// 16-bit pieces that give the same wrapped result.
#include <immintrin.h>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

constexpr int bits_of(dp_dtype_t d) {
    switch (d) {
        case DP_INT8:
        case DP_UINT8:
            return 8;
        case DP_INT16:
        case DP_UINT16:
        case DP_FLOAT16:
        case DP_BFLOAT16:
            return 16;
        case DP_INT32:
        case DP_UINT32:
        case DP_FLOAT32:
            return 32;
        default:
            return 64;
    }
}

// Byte multiply as two 16-bit multiplies (even and odd bytes); the low byte
// of a 16-bit product is the wrapped 8-bit product.
inline __m256i mullo_epi8(__m256i a, __m256i b) {
    const __m256i even = _mm256_mullo_epi16(a, b);
    const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)),
                           _mm256_slli_epi16(odd, 8));
}

// Low 64 bits of a 64x64 product: lo*lo + ((hi*lo + lo*hi) << 32).
inline __m256i mullo_epi64(__m256i a, __m256i b) {
    const __m256i low = _mm256_mul_epu32(a, b);
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                           _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
}

// a < b per 64-bit lane, as all-ones lanes. The unsigned compare flips the
// sign bits and compares signed.
template <bool kSigned>
inline __m256i less_epi64(__m256i a, __m256i b) {
    if constexpr (kSigned) return _mm256_cmpgt_epi64(b, a);
    const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    return _mm256_cmpgt_epi64(_mm256_xor_si256(b, flip), _mm256_xor_si256(a, flip));
}

// All-ones lanes where a lane of `a` is 0; lanes holding 1.
template <int kBits>
inline __m256i zero_lanes(__m256i a) {
    const __m256i z = _mm256_setzero_si256();
    if constexpr (kBits == 8) return _mm256_cmpeq_epi8(a, z);
    if constexpr (kBits == 16) return _mm256_cmpeq_epi16(a, z);
    if constexpr (kBits == 32) return _mm256_cmpeq_epi32(a, z);
    if constexpr (kBits == 64) return _mm256_cmpeq_epi64(a, z);
}
template <int kBits>
inline __m256i one_lanes() {
    if constexpr (kBits == 8) return _mm256_set1_epi8(1);
    if constexpr (kBits == 16) return _mm256_set1_epi16(1);
    if constexpr (kBits == 32) return _mm256_set1_epi32(1);
    if constexpr (kBits == 64) return _mm256_set1_epi64x(1);
}

template <dp_dtype_t D, dp_op_t O>
inline __m256i combine_int(__m256i a, __m256i b) {
    constexpr int kBits = bits_of(D);
    constexpr bool kSigned = D <= DP_INT64;
    if constexpr (O == DP_BAND) {
        return _mm256_and_si256(a, b);
    } else if constexpr (O == DP_BOR) {
        return _mm256_or_si256(a, b);
    } else if constexpr (O == DP_BXOR) {
        return _mm256_xor_si256(a, b);
    } else if constexpr (O == DP_LAND) {  // 1 where neither is 0
        return _mm256_andnot_si256(_mm256_or_si256(zero_lanes<kBits>(a), zero_lanes<kBits>(b)),
                                   one_lanes<kBits>());
    } else if constexpr (O == DP_LOR) {  // 1 where not both are 0
        return _mm256_andnot_si256(_mm256_and_si256(zero_lanes<kBits>(a), zero_lanes<kBits>(b)),
                                   one_lanes<kBits>());
    } else if constexpr (O == DP_LXOR) {  // 1 where exactly one is 0
        return _mm256_and_si256(_mm256_xor_si256(zero_lanes<kBits>(a), zero_lanes<kBits>(b)),
                                one_lanes<kBits>());
    } else if constexpr (O == DP_SUM) {
        if constexpr (kBits == 8) return _mm256_add_epi8(a, b);
        if constexpr (kBits == 16) return _mm256_add_epi16(a, b);
        if constexpr (kBits == 32) return _mm256_add_epi32(a, b);
        if constexpr (kBits == 64) return _mm256_add_epi64(a, b);
    } else if constexpr (O == DP_PROD) {
        if constexpr (kBits == 8) return mullo_epi8(a, b);
        if constexpr (kBits == 16) return _mm256_mullo_epi16(a, b);
        if constexpr (kBits == 32) return _mm256_mullo_epi32(a, b);
        if constexpr (kBits == 64) return mullo_epi64(a, b);
    } else if constexpr (O == DP_MIN) {
        if constexpr (kBits == 8) return kSigned ? _mm256_min_epi8(a, b) : _mm256_min_epu8(a, b);
        if constexpr (kBits == 16) return kSigned ? _mm256_min_epi16(a, b) : _mm256_min_epu16(a, b);
        if constexpr (kBits == 32) return kSigned ? _mm256_min_epi32(a, b) : _mm256_min_epu32(a, b);
        if constexpr (kBits == 64) return _mm256_blendv_epi8(b, a, less_epi64<kSigned>(a, b));
    } else {
        if constexpr (kBits == 8) return kSigned ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
        if constexpr (kBits == 16) return kSigned ? _mm256_max_epi16(a, b) : _mm256_max_epu16(a, b);
        if constexpr (kBits == 32) return kSigned ? _mm256_max_epi32(a, b) : _mm256_max_epu32(a, b);
        if constexpr (kBits == 64) return _mm256_blendv_epi8(b, a, less_epi64<kSigned>(b, a));
    }
}

template <dp_op_t O>
inline __m256 combine_ps(__m256 a, __m256 b) {
    if constexpr (O == DP_SUM) return _mm256_add_ps(a, b);
    if constexpr (O == DP_PROD) return _mm256_mul_ps(a, b);
    if constexpr (O == DP_MIN) return _mm256_min_ps(a, b);
    if constexpr (O == DP_MAX) return _mm256_max_ps(a, b);
}

template <dp_op_t O>
inline __m256d combine_pd(__m256d a, __m256d b) {
    if constexpr (O == DP_SUM) return _mm256_add_pd(a, b);
    if constexpr (O == DP_PROD) return _mm256_mul_pd(a, b);
    if constexpr (O == DP_MIN) return _mm256_min_pd(a, b);
    if constexpr (O == DP_MAX) return _mm256_max_pd(a, b);
}

inline __m128i load128(const unsigned char *p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
}
inline void store128(unsigned char *p, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(p), v);
}

// bfloat16 -> float: the 16 bits become the top half of the float.
inline __m256 widen_bf16(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// float -> bfloat16: add 0x7fff plus the kept lsb and truncate (nearest-even);
// NaNs instead keep their top bits with the quiet bit set. Every lane ends
// below 0x10000, so the unsigned-saturating pack just narrows.
inline __m128i narrow_bf16(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i top = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

// Loads a vector's worth of elements widened to their compute type, combines
// two such vectors, and stores one back narrowed.
template <dp_dtype_t D>
struct Lanes {  // the integer types
    static constexpr size_t kSize = bits_of(D) / 8;
    static constexpr size_t kCount = 32 / kSize;
    static __m256i load(const unsigned char *p) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    }
    static void store(unsigned char *p, __m256i v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v);
    }
    template <dp_op_t O>
    static __m256i combine(__m256i a, __m256i b) {
        return combine_int<D, O>(a, b);
    }
};

template <>
struct Lanes<DP_FLOAT32> {
    static constexpr size_t kSize = 4, kCount = 8;
    static __m256 load(const unsigned char *p) {
        return _mm256_loadu_ps(reinterpret_cast<const float *>(p));
    }
    static void store(unsigned char *p, __m256 v) {
        _mm256_storeu_ps(reinterpret_cast<float *>(p), v);
    }
    template <dp_op_t O>
    static __m256 combine(__m256 a, __m256 b) {
        return combine_ps<O>(a, b);
    }
};

template <>
struct Lanes<DP_FLOAT64> {
    static constexpr size_t kSize = 8, kCount = 4;
    static __m256d load(const unsigned char *p) {
        return _mm256_loadu_pd(reinterpret_cast<const double *>(p));
    }
    static void store(unsigned char *p, __m256d v) {
        _mm256_storeu_pd(reinterpret_cast<double *>(p), v);
    }
    template <dp_op_t O>
    static __m256d combine(__m256d a, __m256d b) {
        return combine_pd<O>(a, b);
    }
};

template <>
struct Lanes<DP_FLOAT16> {
    static constexpr size_t kSize = 2, kCount = 8;
    static __m256 load(const unsigned char *p) { return _mm256_cvtph_ps(load128(p)); }
    static void store(unsigned char *p, __m256 v) {
        store128(p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    template <dp_op_t O>
    static __m256 combine(__m256 a, __m256 b) {
        return combine_ps<O>(a, b);
    }
};

template <>
struct Lanes<DP_BFLOAT16> {
    static constexpr size_t kSize = 2, kCount = 8;
    static __m256 load(const unsigned char *p) { return widen_bf16(load128(p)); }
    static void store(unsigned char *p, __m256 v) { store128(p, narrow_bf16(v)); }
    template <dp_op_t O>
    static __m256 combine(__m256 a, __m256 b) {
        return combine_ps<O>(a, b);
    }
};

// Each step loads both inputs before storing, so dst may be a or b.
template <dp_dtype_t D, dp_op_t O>
void reduce(void *dst, const void *a, const void *b, size_t count) {
    using L = Lanes<D>;
    auto *pd = static_cast<unsigned char *>(dst);
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    size_t i = 0;
    for (; i + L::kCount <= count; i += L::kCount) {
        const size_t at = i * L::kSize;
        L::store(pd + at, L::template combine<O>(L::load(pa + at), L::load(pb + at)));
    }
    if (i < count) {
        const size_t at = i * L::kSize;
        scalar_reduce(D, O)(pd + at, pa + at, pb + at, count - i);
    }
}

template <dp_dtype_t D>
void register_dtype(Table &table) {
    table.reduce[D][DP_SUM] = reduce<D, DP_SUM>;
    table.reduce[D][DP_PROD] = reduce<D, DP_PROD>;
    table.reduce[D][DP_MIN] = reduce<D, DP_MIN>;
    table.reduce[D][DP_MAX] = reduce<D, DP_MAX>;
    if constexpr (D <= DP_UINT64) {  // MPI's logical and bitwise ops: integers only
        table.reduce[D][DP_LAND] = reduce<D, DP_LAND>;
        table.reduce[D][DP_LOR] = reduce<D, DP_LOR>;
        table.reduce[D][DP_LXOR] = reduce<D, DP_LXOR>;
        table.reduce[D][DP_BAND] = reduce<D, DP_BAND>;
        table.reduce[D][DP_BOR] = reduce<D, DP_BOR>;
        table.reduce[D][DP_BXOR] = reduce<D, DP_BXOR>;
    }
}

}  // namespace

void register_reduce_avx2(Table &table) {
    register_dtype<DP_INT8>(table);
    register_dtype<DP_INT16>(table);
    register_dtype<DP_INT32>(table);
    register_dtype<DP_INT64>(table);
    register_dtype<DP_UINT8>(table);
    register_dtype<DP_UINT16>(table);
    register_dtype<DP_UINT32>(table);
    register_dtype<DP_UINT64>(table);
    register_dtype<DP_FLOAT16>(table);
    register_dtype<DP_BFLOAT16>(table);
    register_dtype<DP_FLOAT32>(table);
    register_dtype<DP_FLOAT64>(table);
}

}  // namespace deputy::mover::kernels
