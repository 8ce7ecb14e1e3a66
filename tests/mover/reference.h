// Plain scalar reference implementations of the mover kernels, written for
// obviousness rather than speed, for tests to compare the real kernels (and
// the device built on them) against byte for byte.
//
// The float16/bfloat16 conversions deliberately use a different method from
// the kernels' bit manipulation (scaling to the target's quantum in double and
// rounding with nearbyint), so a shared mistake is unlikely.
#pragma once

#include <deputy/mover.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace deputy::test {

inline uint32_t ref_float_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    return x;
}

inline float ref_bits_float(uint32_t x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

// float16 -> float32, exact; NaNs keep sign and payload and come back quiet
// (what VCVTPH2PS does).
inline float ref_half_to_float(uint16_t h) {
    const bool negative = (h & 0x8000) != 0;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    if (exponent == 0x1f && mantissa != 0) {
        const uint32_t sign = negative ? 0x80000000u : 0;
        return ref_bits_float(sign | 0x7fc00000u | (static_cast<uint32_t>(mantissa) << 13));
    }
    double magnitude;
    if (exponent == 0x1f) {
        magnitude = INFINITY;
    } else if (exponent == 0) {
        magnitude = std::ldexp(static_cast<double>(mantissa), -24);
    } else {
        magnitude = std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
    }
    return static_cast<float>(negative ? -magnitude : magnitude);
}

// float32 -> float16, round to nearest even, overflow to infinity; a NaN
// keeps its sign and top 10 payload bits and is made quiet (VCVTPS2PH).
inline uint16_t ref_float_to_half(float f) {
    const uint32_t x = ref_float_bits(f);
    const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7c00u);
    const double v = std::fabs(static_cast<double>(f));
    // The spacing of half values around v (subnormals share the smallest).
    const int binade = v == 0 ? -14 : std::max(std::ilogb(v), -14);
    const double quantum = std::ldexp(1.0, binade - 10);
    const double rounded = std::nearbyint(v / quantum) * quantum;  // ties to even
    if (rounded >= 65536.0) return static_cast<uint16_t>(sign | 0x7c00u);
    if (rounded < std::ldexp(1.0, -14)) {
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(rounded / std::ldexp(1.0, -24)));
    }
    const int e = std::ilogb(rounded);
    const auto mantissa = static_cast<uint16_t>(rounded / std::ldexp(1.0, e - 10) - 1024);
    return static_cast<uint16_t>(sign | ((e + 15) << 10) | mantissa);
}

inline float ref_bfloat_to_float(uint16_t h) {
    return ref_bits_float(static_cast<uint32_t>(h) << 16);
}

// float32 -> bfloat16, round to nearest even, overflow to infinity; a NaN
// keeps its top bits and is made quiet.
inline uint16_t ref_float_to_bfloat(float f) {
    const uint32_t x = ref_float_bits(f);
    if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
    if (std::isinf(f)) return static_cast<uint16_t>(x >> 16);
    const double v = std::fabs(static_cast<double>(f));
    const int binade = v == 0 ? -126 : std::max(std::ilogb(v), -126);
    const double quantum = std::ldexp(1.0, binade - 7);
    const double rounded = std::nearbyint(v / quantum) * quantum;
    const uint16_t sign = (x >> 16) & 0x8000u;
    if (rounded >= std::ldexp(1.0, 128)) return static_cast<uint16_t>(sign | 0x7f80u);
    // rounded has at most 8 significant bits: exact as a float, low half zero.
    return static_cast<uint16_t>(sign | ref_float_bits(static_cast<float>(rounded)) >> 16);
}

namespace ref_detail {

// x86's rule for an arithmetic result with NaN operands: the first NaN
// operand, made quiet.
template <typename F>
F quiet(F v) {
    using Bits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
    Bits b;
    std::memcpy(&b, &v, sizeof b);
    b |= Bits{1} << (sizeof(F) == 4 ? 22 : 51);
    std::memcpy(&v, &b, sizeof b);
    return v;
}

template <typename T>
T combine(T a, T b, dp_op_t op) {
    if constexpr (std::is_integral_v<T>) {
        switch (op) {  // MPI's logical and bitwise reductions
            case DP_LAND: return T(a != 0 && b != 0);
            case DP_LOR: return T(a != 0 || b != 0);
            case DP_LXOR: return T((a != 0) != (b != 0));
            case DP_BAND: return T(a & b);
            case DP_BOR: return T(a | b);
            case DP_BXOR: return T(a ^ b);
            default: break;
        }
    }
    if (op == DP_MIN) return a < b ? a : b;
    if (op == DP_MAX) return a > b ? a : b;
    if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a)) return quiet(a);
        if (std::isnan(b)) return quiet(b);
        return op == DP_SUM ? a + b : a * b;
    } else {
        using U = std::make_unsigned_t<T>;
        const uint64_t x = static_cast<U>(a), y = static_cast<U>(b);
        return static_cast<T>(static_cast<U>(op == DP_SUM ? x + y : x * y));
    }
}

template <typename T>
void reduce_plain(void *dst, const void *a, const void *b, size_t count, dp_op_t op) {
    for (size_t i = 0; i < count; ++i) {
        T x, y;
        std::memcpy(&x, static_cast<const char *>(a) + i * sizeof(T), sizeof(T));
        std::memcpy(&y, static_cast<const char *>(b) + i * sizeof(T), sizeof(T));
        const T r = combine(x, y, op);
        std::memcpy(static_cast<char *>(dst) + i * sizeof(T), &r, sizeof(T));
    }
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void reduce_16(void *dst, const void *a, const void *b, size_t count, dp_op_t op) {
    for (size_t i = 0; i < count; ++i) {
        uint16_t x, y;
        std::memcpy(&x, static_cast<const char *>(a) + i * 2, 2);
        std::memcpy(&y, static_cast<const char *>(b) + i * 2, 2);
        const uint16_t r = Narrow(combine(Widen(x), Widen(y), op));
        std::memcpy(static_cast<char *>(dst) + i * 2, &r, 2);
    }
}

// MINLOC / MAXLOC written out as MPI states them: of the two (value, index)
// pairs, the one whose value is smaller (larger); of equal values (here:
// neither compares below the other, which a NaN also gives) the lower index.
template <typename V, typename I>
void reduce_pair(void *dst, const void *a, const void *b, size_t count, dp_op_t op) {
    struct P {
        V value;
        I index;
    };
    for (size_t i = 0; i < count; ++i) {
        P x, y;
        std::memcpy(&x, static_cast<const char *>(a) + i * sizeof(P), sizeof(P));
        std::memcpy(&y, static_cast<const char *>(b) + i * sizeof(P), sizeof(P));
        bool take_y;
        if (op == DP_MINLOC ? y.value < x.value : y.value > x.value) take_y = true;
        else if (op == DP_MINLOC ? x.value < y.value : x.value > y.value) take_y = false;
        else take_y = y.index < x.index;
        std::memcpy(static_cast<char *>(dst) + i * sizeof(P), take_y ? &y : &x, sizeof(P));
    }
}

}  // namespace ref_detail

// dst[i] = a[i] op b[i] with the semantics of mover/kernels.h. Where both
// float operands of a sum or product are NaN, the result is a's NaN (x86's
// rule; a kernel may legitimately return b's, see kernels.h).
inline void ref_reduce(void *dst, const void *a, const void *b, size_t count, dp_dtype_t dtype,
                       dp_op_t op) {
    using namespace ref_detail;
    switch (dtype) {
        case DP_INT8:
            return reduce_plain<int8_t>(dst, a, b, count, op);
        case DP_INT16:
            return reduce_plain<int16_t>(dst, a, b, count, op);
        case DP_INT32:
            return reduce_plain<int32_t>(dst, a, b, count, op);
        case DP_INT64:
            return reduce_plain<int64_t>(dst, a, b, count, op);
        case DP_UINT8:
            return reduce_plain<uint8_t>(dst, a, b, count, op);
        case DP_UINT16:
            return reduce_plain<uint16_t>(dst, a, b, count, op);
        case DP_UINT32:
            return reduce_plain<uint32_t>(dst, a, b, count, op);
        case DP_UINT64:
            return reduce_plain<uint64_t>(dst, a, b, count, op);
        case DP_FLOAT16:
            return reduce_16<ref_half_to_float, ref_float_to_half>(dst, a, b, count, op);
        case DP_BFLOAT16:
            return reduce_16<ref_bfloat_to_float, ref_float_to_bfloat>(dst, a, b, count, op);
        case DP_FLOAT32:
            return reduce_plain<float>(dst, a, b, count, op);
        case DP_FLOAT64:
            return reduce_plain<double>(dst, a, b, count, op);
        case DP_FLOAT32_INT32:
            return reduce_pair<float, int32_t>(dst, a, b, count, op);
        case DP_FLOAT64_INT32:
            return reduce_pair<double, int32_t>(dst, a, b, count, op);
        case DP_INT64_INT32:
            return reduce_pair<int64_t, int32_t>(dst, a, b, count, op);
        case DP_INT32_INT32:
            return reduce_pair<int32_t, int32_t>(dst, a, b, count, op);
        case DP_INT16_INT32:
            return reduce_pair<int16_t, int32_t>(dst, a, b, count, op);
        case DP_FLOAT32_FLOAT32:
            return reduce_pair<float, float>(dst, a, b, count, op);
        case DP_FLOAT64_FLOAT64:
            return reduce_pair<double, double>(dst, a, b, count, op);
        default:
            return;
    }
}

// CRC32C one bit at a time (reflected polynomial 0x82F63B78), chainable:
// the seed is a previous result.
inline uint32_t ref_crc32c(uint32_t seed, const void *p, size_t n) {
    uint32_t crc = ~seed;
    for (size_t i = 0; i < n; ++i) {
        crc ^= static_cast<const uint8_t *>(p)[i];
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

// DSA delta record of b against a (n a multiple of 8): SIZE_MAX when the
// entries do not fit in max_record bytes, never writing past it.
inline size_t ref_create_delta(const void *a, const void *b, size_t n, void *record,
                               size_t max_record) {
    const auto *pa = static_cast<const uint8_t *>(a);
    const auto *pb = static_cast<const uint8_t *>(b);
    auto *out = static_cast<uint8_t *>(record);
    size_t size = 0;
    for (size_t g = 0; g < n / 8; ++g) {
        if (std::memcmp(pa + 8 * g, pb + 8 * g, 8) == 0) continue;
        if (size + DP_DELTA_ENTRY_SIZE > max_record) return SIZE_MAX;
        out[size] = static_cast<uint8_t>(g & 0xff);
        out[size + 1] = static_cast<uint8_t>(g >> 8);
        std::memcpy(out + size + 2, pb + 8 * g, 8);
        size += DP_DELTA_ENTRY_SIZE;
    }
    return size;
}

// Applies a delta record; false, with dst untouched, for a bad record.
inline bool ref_apply_delta(void *dst, size_t dst_size, const void *record, size_t record_size) {
    const auto *in = static_cast<const uint8_t *>(record);
    if (record_size % DP_DELTA_ENTRY_SIZE != 0) return false;
    for (size_t at = 0; at < record_size; at += DP_DELTA_ENTRY_SIZE) {
        const size_t g = in[at] | static_cast<size_t>(in[at + 1]) << 8;
        if (8 * g + 8 > dst_size) return false;
    }
    for (size_t at = 0; at < record_size; at += DP_DELTA_ENTRY_SIZE) {
        const size_t g = in[at] | static_cast<size_t>(in[at + 1]) << 8;
        std::memcpy(static_cast<uint8_t *>(dst) + 8 * g, in + at + 2, 8);
    }
    return true;
}

// CRC16 T10-DIF one bit at a time (polynomial 0x8BB7, not reflected, no
// final xor): CRC-16/T10-DIF of "123456789" is 0xD0DB.
inline uint16_t ref_crc16_t10dif(uint16_t crc, const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        crc ^= uint16_t(static_cast<const uint8_t *>(p)[i] << 8);
        for (int bit = 0; bit < 8; ++bit)
            crc = uint16_t((crc & 0x8000) ? (crc << 1) ^ 0x8BB7 : crc << 1);
    }
    return crc;
}

// The guard of a block as a DIF descriptor's op_flags ask for it.
inline uint16_t ref_dif_guard(const void *block, size_t n, unsigned op_flags) {
    uint16_t crc = ref_crc16_t10dif(op_flags & DP_DIF_INVERT_CRC_SEED ? 0xffff : 0, block, n);
    return op_flags & DP_DIF_INVERT_CRC_RESULT ? uint16_t(~crc) : crc;
}

// Writes the big-endian tuple {guard, app, ref} at p.
inline void ref_write_tuple(uint8_t *p, uint16_t guard, uint16_t app, uint32_t ref) {
    p[0] = uint8_t(guard >> 8), p[1] = uint8_t(guard);
    p[2] = uint8_t(app >> 8), p[3] = uint8_t(app);
    p[4] = uint8_t(ref >> 24), p[5] = uint8_t(ref >> 16), p[6] = uint8_t(ref >> 8), p[7] = uint8_t(ref);
}

// Protects `blocks` blocks laid out block+tuple in place: each tuple gets the
// block's guard, application tag `app` (+ i when app_increment) and reference
// tag `ref` + i (fixed when ref_fixed).
inline void ref_protect(uint8_t *p, uint32_t block, uint64_t blocks, uint32_t ref, uint16_t app,
                        unsigned op_flags, bool ref_fixed = false, bool app_increment = false) {
    for (uint64_t i = 0; i < blocks; ++i) {
        uint8_t *data = p + i * (block + DP_DIF_TUPLE_SIZE);
        ref_write_tuple(data + block, ref_dif_guard(data, block, op_flags),
                        uint16_t(app + (app_increment ? i : 0)), uint32_t(ref + (ref_fixed ? 0 : i)));
    }
}

}  // namespace deputy::test
