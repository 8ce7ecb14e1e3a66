// Software float16 and bfloat16 conversions for the scalar reduction, bit-exact
// with what the SIMD kernels get from F16C (VCVTPH2PS / VCVTPS2PH with
// round-to-nearest-even) and from their bfloat16 shift-and-round sequence, so
// every ISA level produces the same bytes.
//
// Only scalar files may include this: its inline functions must never be
// compiled with AVX flags (see dispatch.h).
#pragma once

#include <cstdint>
#include <cstring>

namespace deputy::mover::kernels {

inline uint32_t float_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    return x;
}

inline float bits_float(uint32_t x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

// Exact. A signalling NaN comes back quiet, as VCVTPH2PS returns it.
inline float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) {  // inf, or NaN with its payload moved up and the quiet bit set
        return bits_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0));
    }
    if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
    if (mantissa == 0) return bits_float(sign);
    // Subnormal: mantissa * 2^-24 is a normal float; renormalise on its top bit.
    const uint32_t top = 31 - static_cast<uint32_t>(__builtin_clz(mantissa));
    return bits_float(sign | ((top + 103) << 23) | ((mantissa << (23 - top)) & 0x7fffffu));
}

// Round to nearest, ties to even; overflow gives infinity; a NaN keeps its
// sign and top 10 payload bits and is made quiet (VCVTPS2PH's result).
inline uint16_t float_to_half(float f) {
    const uint32_t x = float_bits(f);
    const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: rounds up
    if (abs >= 0x38800000u) {  // normal half: drop 13 mantissa bits, rebias 127 -> 15
        const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
        return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
    }
    if (abs <= 0x33000000u) return sign;  // <= 2^-25: ties to the even zero
    // Subnormal half: the value in units of 2^-24, rounded. The carry of a
    // round-up from 0x3ff correctly yields the smallest normal, 0x400.
    const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - (abs >> 23);  // 14..24
    uint32_t q = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (q & 1u) != 0)) ++q;
    return static_cast<uint16_t>(sign | q);
}

inline float bfloat_to_float(uint16_t h) {
    return bits_float(static_cast<uint32_t>(h) << 16);
}

// Round to nearest, ties to even (the carry overflows to infinity correctly);
// a NaN keeps its top payload bits and is made quiet, so it cannot round to
// infinity.
inline uint16_t float_to_bfloat(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace deputy::mover::kernels
