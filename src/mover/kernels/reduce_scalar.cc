// Scalar reduction for every dtype x op: the baseline, the tails of the SIMD
// kernels, and the definition of the bit-exact semantics they all follow.
#include <cstring>
#include <type_traits>

#include "mover/kernels/dispatch.h"
#include "mover/kernels/half.h"

namespace deputy::mover::kernels {
namespace {

// How an element is stored and what type it is combined in.
template <typename T>
struct Plain {
    using Storage = T;
    static T widen(T v) { return v; }
    static T narrow(T v) { return v; }
};

struct Half {
    using Storage = uint16_t;
    static float widen(uint16_t v) { return half_to_float(v); }
    static uint16_t narrow(float v) { return float_to_half(v); }
};

struct BFloat {
    using Storage = uint16_t;
    static float widen(uint16_t v) { return bfloat_to_float(v); }
    static uint16_t narrow(float v) { return float_to_bfloat(v); }
};

template <dp_op_t Op, typename T>
T combine(T a, T b) {
    if constexpr (Op == DP_LAND) {
        return T((a != 0) & (b != 0));
    } else if constexpr (Op == DP_LOR) {
        return T((a != 0) | (b != 0));
    } else if constexpr (Op == DP_LXOR) {
        return T((a != 0) ^ (b != 0));
    } else if constexpr (Op == DP_BAND) {
        return T(a & b);
    } else if constexpr (Op == DP_BOR) {
        return T(a | b);
    } else if constexpr (Op == DP_BXOR) {
        return T(a ^ b);
    } else if constexpr (Op == DP_MIN) {
        return a < b ? a : b;  // MINPS's rule: b when either is NaN or both are zero
    } else if constexpr (Op == DP_MAX) {
        return a > b ? a : b;
    } else if constexpr (std::is_floating_point_v<T>) {
        return Op == DP_SUM ? a + b : a * b;
    } else {
        // Wrap-around in unsigned arithmetic, wide enough that the narrow types
        // are not promoted to (overflowing) int.
        using U = std::make_unsigned_t<T>;
        using Wide = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t, U>;
        const Wide x = static_cast<U>(a), y = static_cast<U>(b);
        return static_cast<T>(static_cast<U>(Op == DP_SUM ? x + y : x * y));
    }
}

// memcpy loads and stores: the mover does not require aligned elements.
template <typename Codec, dp_op_t Op>
void reduce(void *dst, const void *a, const void *b, size_t count) {
    using S = typename Codec::Storage;
    auto *pd = static_cast<unsigned char *>(dst);
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    for (size_t i = 0; i < count; ++i) {
        S x, y;
        std::memcpy(&x, pa + i * sizeof(S), sizeof(S));
        std::memcpy(&y, pb + i * sizeof(S), sizeof(S));
        const S r = Codec::narrow(combine<Op>(Codec::widen(x), Codec::widen(y)));
        std::memcpy(pd + i * sizeof(S), &r, sizeof(S));
    }
}

// The logical and bitwise ops exist for the integer types only
// (names.h, op_applies): nullptr in the floating rows.
template <typename Codec, dp_op_t Op>
constexpr ReduceFn integer_only() {
    if constexpr (std::is_integral_v<typename Codec::Storage> &&
                  std::is_same_v<decltype(Codec::widen(typename Codec::Storage{})),
                                 typename Codec::Storage>)
        return reduce<Codec, Op>;
    else
        return nullptr;
}

template <typename Codec>
struct Row {
    static constexpr ReduceFn fn[DP_OP_COUNT] = {
        reduce<Codec, DP_SUM>,           reduce<Codec, DP_PROD>,
        reduce<Codec, DP_MIN>,           reduce<Codec, DP_MAX>,
        integer_only<Codec, DP_LAND>(),  integer_only<Codec, DP_LOR>(),
        integer_only<Codec, DP_LXOR>(),  integer_only<Codec, DP_BAND>(),
        integer_only<Codec, DP_BOR>(),   integer_only<Codec, DP_BXOR>(),
        nullptr,                         nullptr,  // minloc, maxloc: pairs only
    };
};
static_assert(DP_OP_COUNT == 12, "a new op needs its column in Row and PairRow");

// MINLOC / MAXLOC on C's struct { value; index; }: one of the two pairs,
// whole (mover.h: the smaller / larger value, of equal or unordered values
// the lower index).
template <typename V, typename I>
struct Pair {
    V value;
    I index;
};
template <typename V, typename I, dp_op_t Op>
void reduce_location(void *dst, const void *a, const void *b, size_t count) {
    using P = Pair<V, I>;
    auto *pd = static_cast<unsigned char *>(dst);
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    for (size_t i = 0; i < count; ++i) {
        P x, y;
        std::memcpy(&x, pa + i * sizeof(P), sizeof(P));
        std::memcpy(&y, pb + i * sizeof(P), sizeof(P));
        const bool x_wins = Op == DP_MAXLOC ? x.value > y.value : x.value < y.value;
        const bool y_wins = Op == DP_MAXLOC ? y.value > x.value : y.value < x.value;
        const P &r = x_wins ? x : y_wins ? y : (y.index < x.index ? y : x);
        std::memcpy(pd + i * sizeof(P), &r, sizeof(P));
    }
}
template <typename V, typename I>
struct PairRow {
    static_assert(sizeof(Pair<V, I>) == 8 || sizeof(Pair<V, I>) == 16);
    static constexpr ReduceFn fn[DP_OP_COUNT] = {
        nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        reduce_location<V, I, DP_MINLOC>, reduce_location<V, I, DP_MAXLOC>,
    };
};

// In dp_dtype_t order.
constexpr const ReduceFn *kRows[DP_DTYPE_COUNT] = {
    Row<Plain<int8_t>>::fn,   Row<Plain<int16_t>>::fn,  Row<Plain<int32_t>>::fn,
    Row<Plain<int64_t>>::fn,  Row<Plain<uint8_t>>::fn,  Row<Plain<uint16_t>>::fn,
    Row<Plain<uint32_t>>::fn, Row<Plain<uint64_t>>::fn, Row<Half>::fn,
    Row<BFloat>::fn,          Row<Plain<float>>::fn,    Row<Plain<double>>::fn,
    PairRow<float, int32_t>::fn,  PairRow<double, int32_t>::fn, PairRow<int64_t, int32_t>::fn,
    PairRow<int32_t, int32_t>::fn, PairRow<int16_t, int32_t>::fn, PairRow<float, float>::fn,
    PairRow<double, double>::fn,
};

}  // namespace

ReduceFn scalar_reduce(dp_dtype_t dtype, dp_op_t op) {
    return kRows[dtype][op];
}

void register_reduce_scalar(Table &table) {
    for (int d = 0; d < DP_DTYPE_COUNT; ++d) {
        for (int o = 0; o < DP_OP_COUNT; ++o) table.reduce[d][o] = kRows[d][o];
    }
}

}  // namespace deputy::mover::kernels
