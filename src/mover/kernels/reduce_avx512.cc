// AVX-512 reduction for every numeric dtype x op (the pairs' MINLOC / MAXLOC
// stay scalar), one vector per step and the scalar
// kernel for the last partial vector. Each instruction below computes exactly
// the scalar definition in reduce_scalar.cc: integer add/multiply wrap,
// VMINPS/VMAXPS are (a < b) ? a : b and (a > b) ? a : b, VCVTPH2PS/VCVTPS2PH
// convert float16 exactly and round to nearest-even, and bfloat16 is widened
// by a shift and rounded with the same integer sequence as the scalar code.
// GCC 12's AVX-512 headers start some intrinsics from a self-initialised
// "undefined" vector and then warn about it (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

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

// There is no byte multiply: multiply the even and the odd bytes as 16-bit
// lanes (the low byte of a 16-bit product is the wrapped 8-bit product).
inline __m512i mullo_epi8(__m512i a, __m512i b) {
    const __m512i even = _mm512_mullo_epi16(a, b);
    const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
    return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0xff)),
                           _mm512_slli_epi16(odd, 8));
}

// The lanes of `a` that are 0, as a mask; `m`'s lanes set to 1, the others 0.
template <int kBits>
inline auto zero_mask(__m512i a) {
    const __m512i z = _mm512_setzero_si512();
    if constexpr (kBits == 8) return _mm512_cmpeq_epi8_mask(a, z);
    if constexpr (kBits == 16) return _mm512_cmpeq_epi16_mask(a, z);
    if constexpr (kBits == 32) return _mm512_cmpeq_epi32_mask(a, z);
    if constexpr (kBits == 64) return _mm512_cmpeq_epi64_mask(a, z);
}
template <int kBits, typename Mask>
inline __m512i ones_where(Mask m) {
    if constexpr (kBits == 8) return _mm512_maskz_mov_epi8(m, _mm512_set1_epi8(1));
    if constexpr (kBits == 16) return _mm512_maskz_mov_epi16(m, _mm512_set1_epi16(1));
    if constexpr (kBits == 32) return _mm512_maskz_mov_epi32(m, _mm512_set1_epi32(1));
    if constexpr (kBits == 64) return _mm512_maskz_mov_epi64(m, _mm512_set1_epi64(1));
}

template <dp_dtype_t D, dp_op_t O>
inline __m512i combine_int(__m512i a, __m512i b) {
    constexpr int kBits = bits_of(D);
    constexpr bool kSigned = D <= DP_INT64;
    if constexpr (O == DP_BAND) {
        return _mm512_and_si512(a, b);
    } else if constexpr (O == DP_BOR) {
        return _mm512_or_si512(a, b);
    } else if constexpr (O == DP_BXOR) {
        return _mm512_xor_si512(a, b);
    } else if constexpr (O == DP_LAND || O == DP_LOR || O == DP_LXOR) {
        const auto za = zero_mask<kBits>(a), zb = zero_mask<kBits>(b);
        using Mask = decltype(za);
        if constexpr (O == DP_LAND) return ones_where<kBits>(Mask(~(za | zb)));
        if constexpr (O == DP_LOR) return ones_where<kBits>(Mask(~(za & zb)));
        if constexpr (O == DP_LXOR) return ones_where<kBits>(Mask(za ^ zb));
    } else if constexpr (O == DP_SUM) {
        if constexpr (kBits == 8) return _mm512_add_epi8(a, b);
        if constexpr (kBits == 16) return _mm512_add_epi16(a, b);
        if constexpr (kBits == 32) return _mm512_add_epi32(a, b);
        if constexpr (kBits == 64) return _mm512_add_epi64(a, b);
    } else if constexpr (O == DP_PROD) {
        if constexpr (kBits == 8) return mullo_epi8(a, b);
        if constexpr (kBits == 16) return _mm512_mullo_epi16(a, b);
        if constexpr (kBits == 32) return _mm512_mullo_epi32(a, b);
        if constexpr (kBits == 64) return _mm512_mullo_epi64(a, b);
    } else if constexpr (O == DP_MIN) {
        if constexpr (kBits == 8) return kSigned ? _mm512_min_epi8(a, b) : _mm512_min_epu8(a, b);
        if constexpr (kBits == 16) return kSigned ? _mm512_min_epi16(a, b) : _mm512_min_epu16(a, b);
        if constexpr (kBits == 32) return kSigned ? _mm512_min_epi32(a, b) : _mm512_min_epu32(a, b);
        if constexpr (kBits == 64) return kSigned ? _mm512_min_epi64(a, b) : _mm512_min_epu64(a, b);
    } else {
        if constexpr (kBits == 8) return kSigned ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b);
        if constexpr (kBits == 16) return kSigned ? _mm512_max_epi16(a, b) : _mm512_max_epu16(a, b);
        if constexpr (kBits == 32) return kSigned ? _mm512_max_epi32(a, b) : _mm512_max_epu32(a, b);
        if constexpr (kBits == 64) return kSigned ? _mm512_max_epi64(a, b) : _mm512_max_epu64(a, b);
    }
}

template <dp_op_t O>
inline __m512 combine_ps(__m512 a, __m512 b) {
    if constexpr (O == DP_SUM) return _mm512_add_ps(a, b);
    if constexpr (O == DP_PROD) return _mm512_mul_ps(a, b);
    if constexpr (O == DP_MIN) return _mm512_min_ps(a, b);
    if constexpr (O == DP_MAX) return _mm512_max_ps(a, b);
}

template <dp_op_t O>
inline __m512d combine_pd(__m512d a, __m512d b) {
    if constexpr (O == DP_SUM) return _mm512_add_pd(a, b);
    if constexpr (O == DP_PROD) return _mm512_mul_pd(a, b);
    if constexpr (O == DP_MIN) return _mm512_min_pd(a, b);
    if constexpr (O == DP_MAX) return _mm512_max_pd(a, b);
}

inline __m256i load256(const unsigned char *p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}
inline void store256(unsigned char *p, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v);
}

// bfloat16 -> float: the 16 bits become the top half of the float.
inline __m512 widen_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// float -> bfloat16: add 0x7fff plus the kept lsb and truncate (nearest-even);
// NaNs instead keep their top bits with the quiet bit set.
inline __m256i narrow_bf16(__m512 f) {
    const __m512i x = _mm512_castps_si512(f);
    const __m512i top = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i quiet = _mm512_or_si512(top, _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

// Loads a vector's worth of elements widened to their compute type, combines
// two such vectors, and stores one back narrowed.
template <dp_dtype_t D>
struct Lanes {  // the integer types
    static constexpr size_t kSize = bits_of(D) / 8;
    static constexpr size_t kCount = 64 / kSize;
    static __m512i load(const unsigned char *p) { return _mm512_loadu_si512(p); }
    static void store(unsigned char *p, __m512i v) { _mm512_storeu_si512(p, v); }
    template <dp_op_t O>
    static __m512i combine(__m512i a, __m512i b) {
        return combine_int<D, O>(a, b);
    }
};

template <>
struct Lanes<DP_FLOAT32> {
    static constexpr size_t kSize = 4, kCount = 16;
    static __m512 load(const unsigned char *p) { return _mm512_loadu_ps(p); }
    static void store(unsigned char *p, __m512 v) { _mm512_storeu_ps(p, v); }
    template <dp_op_t O>
    static __m512 combine(__m512 a, __m512 b) {
        return combine_ps<O>(a, b);
    }
};

template <>
struct Lanes<DP_FLOAT64> {
    static constexpr size_t kSize = 8, kCount = 8;
    static __m512d load(const unsigned char *p) { return _mm512_loadu_pd(p); }
    static void store(unsigned char *p, __m512d v) { _mm512_storeu_pd(p, v); }
    template <dp_op_t O>
    static __m512d combine(__m512d a, __m512d b) {
        return combine_pd<O>(a, b);
    }
};

template <>
struct Lanes<DP_FLOAT16> {
    static constexpr size_t kSize = 2, kCount = 16;
    static __m512 load(const unsigned char *p) { return _mm512_cvtph_ps(load256(p)); }
    static void store(unsigned char *p, __m512 v) {
        store256(p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    template <dp_op_t O>
    static __m512 combine(__m512 a, __m512 b) {
        return combine_ps<O>(a, b);
    }
};

template <>
struct Lanes<DP_BFLOAT16> {
    static constexpr size_t kSize = 2, kCount = 16;
    static __m512 load(const unsigned char *p) { return widen_bf16(load256(p)); }
    static void store(unsigned char *p, __m512 v) { store256(p, narrow_bf16(v)); }
    template <dp_op_t O>
    static __m512 combine(__m512 a, __m512 b) {
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

void register_reduce_avx512(Table &table) {
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
