// Test data and what a correct collective must produce from it.
//
// Bit-exactness of reductions: the data of reducing collectives are small
// integers (values listed at exact_value) chosen so that every partial
// result of every reduction order is exactly representable in the dtype —
// float16 and bfloat16 included — so the result does not depend on the
// order in which an algorithm combines ranks and can be compared bit for bit
// with a reference that simply folds ranks 0..P-1. Integer wrap-around (int8
// products) is order-independent too. Rounding behaviour with arbitrary
// floats is covered separately, with a tolerance (float_reduction_test.cc).
//
// The reference arithmetic is tests/mover/reference.h's ref_reduce, written
// independently of the mover kernels the executor uses.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "coll/collective.h"
#include "mover/reference.h"

namespace deputy::test {

using Bytes = std::vector<unsigned char>;

inline bool is_float(dp_dtype_t t) {
    return t == DP_FLOAT16 || t == DP_BFLOAT16 || t == DP_FLOAT32 || t == DP_FLOAT64;
}
inline bool is_unsigned(dp_dtype_t t) {
    return t == DP_UINT8 || t == DP_UINT16 || t == DP_UINT32 || t == DP_UINT64;
}

// Stores `v` (an integer exactly representable in dtype) at `out`.
inline void encode(dp_dtype_t dtype, double v, unsigned char *out) {
    const auto store = [out](auto x) { std::memcpy(out, &x, sizeof x); };
    const auto i = static_cast<int64_t>(v);
    switch (dtype) {
        case DP_INT8:
            return store(static_cast<int8_t>(i));
        case DP_INT16:
            return store(static_cast<int16_t>(i));
        case DP_INT32:
            return store(static_cast<int32_t>(i));
        case DP_INT64:
            return store(i);
        case DP_UINT8:
            return store(static_cast<uint8_t>(i));
        case DP_UINT16:
            return store(static_cast<uint16_t>(i));
        case DP_UINT32:
            return store(static_cast<uint32_t>(i));
        case DP_UINT64:
            return store(static_cast<uint64_t>(i));
        case DP_FLOAT16:
            return store(ref_float_to_half(static_cast<float>(v)));
        case DP_BFLOAT16:
            return store(ref_float_to_bfloat(static_cast<float>(v)));
        case DP_FLOAT32:
            return store(static_cast<float>(v));
        case DP_FLOAT64:
            return store(v);
        default:
            return;
    }
}

// One element value whose reductions over up to 8 ranks, in any order, are
// exact: sums of values in [-8, 8] stay within +-64 (exact even in bfloat16's
// 8-bit significand); products of +-1 and +-2 are powers of two up to 2^8;
// min and max never round at all. Unsigned types get the non-negative half.
inline double exact_value(dp_dtype_t dtype, dp_op_t op, std::mt19937_64 &random) {
    const bool unsign = is_unsigned(dtype);
    const auto between = [&](int lo, int hi) {
        return static_cast<double>(std::uniform_int_distribution<int>(lo, hi)(random));
    };
    switch (op) {
        case DP_SUM:
            return unsign ? between(0, 16) : between(-8, 8);
        case DP_PROD: {
            static constexpr double kFactors[] = {1, 2, -1, -2};
            return kFactors[std::uniform_int_distribution<int>(0, unsign ? 1 : 3)(random)];
        }
        default:
            return unsign ? between(0, 200) : between(-100, 100);
    }
}

inline Bytes exact_data(dp_dtype_t dtype, dp_op_t op, size_t count, std::mt19937_64 &random) {
    const size_t e = dp_dtype_size(dtype);
    Bytes out(count * e);
    for (size_t i = 0; i < count; ++i) encode(dtype, exact_value(dtype, op, random), &out[i * e]);
    return out;
}

inline Bytes random_bytes(size_t n, std::mt19937_64 &random) {
    Bytes out(n);
    for (auto &b : out) b = static_cast<unsigned char>(random());
    return out;
}

// The bytes each rank's input holds, in the layout of collective.h (what the
// source buffer holds out of place): n, P * n, n, P * n, n, 0.
inline size_t input_bytes(const coll::CollectiveArgs &a) {
    const size_t n = a.count * dp_dtype_size(a.dtype);
    switch (a.collective) {
        case coll::Collective::reduce_scatter:
        case coll::Collective::alltoall:
        case coll::Collective::alltoallv:  // with equal counts
        case coll::Collective::scatter:    // (only the root's is read)
        case coll::Collective::scatterv:   // with equal counts, as scatter
        case coll::Collective::reduce_scatterv:  // and reduce_scatter
            return static_cast<size_t>(a.size) * n;
        case coll::Collective::barrier:
            return 0;
        case coll::Collective::allreduce:
        case coll::Collective::allgather:
        case coll::Collective::bcast:
        case coll::Collective::reduce:
        case coll::Collective::gather:
        case coll::Collective::scan:
        case coll::Collective::exscan:
        case coll::Collective::allgatherv:  // with equal counts, as allgather
        case coll::Collective::gatherv:     // and gather
            return n;
    }
    return n;
}

// What each rank's destination must hold afterwards (for reduce_scatter
// only its first block, the result, is specified). Empty for a rank whose
// destination is not written (reduce and gather off the root, exscan's
// rank 0): it must be left as it was.
inline std::vector<Bytes> expected_outputs(const coll::CollectiveArgs &a,
                                           const std::vector<Bytes> &inputs) {
    const auto p = static_cast<size_t>(a.size);
    const size_t n = a.count * dp_dtype_size(a.dtype);
    std::vector<Bytes> out(p);
    // Reduction of bytes [offset, offset + n) over ranks 0..last (all by
    // default), rank 0 first.
    const auto reduced = [&](size_t offset, size_t last = SIZE_MAX) {
        Bytes acc(inputs[0].begin() + static_cast<long>(offset),
                  inputs[0].begin() + static_cast<long>(offset + n));
        for (size_t r = 1; r < p && r <= last; ++r) {
            ref_reduce(acc.data(), acc.data(), inputs[r].data() + offset, a.count, a.dtype, a.op);
        }
        return acc;
    };
    const auto root = static_cast<size_t>(a.root);
    switch (a.collective) {
        case coll::Collective::allreduce: {
            const Bytes all = reduced(0);
            for (auto &o : out) o = all;
            break;
        }
        case coll::Collective::reduce_scatter:
        case coll::Collective::reduce_scatterv:  // with equal counts: reduce_scatter's layout
            for (size_t r = 0; r < p; ++r) out[r] = reduced(r * n);
            break;
        case coll::Collective::allgather:
        case coll::Collective::allgatherv:  // with equal counts: allgather's layout
            for (auto &o : out) {
                for (const Bytes &in : inputs) o.insert(o.end(), in.begin(), in.end());
            }
            break;
        case coll::Collective::alltoall:
        case coll::Collective::alltoallv:  // with equal counts: alltoall's layout
            for (size_t r = 0; r < p; ++r) {
                for (size_t from = 0; from < p; ++from) {
                    const auto first = inputs[from].begin() + static_cast<long>(r * n);
                    out[r].insert(out[r].end(), first, first + static_cast<long>(n));
                }
            }
            break;
        case coll::Collective::bcast:
            for (auto &o : out) o = inputs[static_cast<size_t>(a.root)];
            break;
        case coll::Collective::barrier:
            break;
        case coll::Collective::reduce:
            out[root] = reduced(0);
            break;
        case coll::Collective::gather:
        case coll::Collective::gatherv:  // with equal counts: gather's layout
            for (const Bytes &in : inputs) out[root].insert(out[root].end(), in.begin(), in.end());
            break;
        case coll::Collective::scatter:
        case coll::Collective::scatterv:  // with equal counts: scatter's layout
            for (size_t r = 0; r < p; ++r) {
                const auto first = inputs[root].begin() + static_cast<long>(r * n);
                out[r].assign(first, first + static_cast<long>(n));
            }
            break;
        case coll::Collective::scan:
            for (size_t r = 0; r < p; ++r) out[r] = reduced(0, r);
            break;
        case coll::Collective::exscan:
            for (size_t r = 1; r < p; ++r) out[r] = reduced(0, r - 1);
            break;
    }
    return out;
}

}  // namespace deputy::test
