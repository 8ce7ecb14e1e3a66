// What the collective tests against real agents share: the memory modes a
// team's buffers may live in, and the reference reduction.
#pragma once

#include <deputy/deputy.h>

#include <cstdint>
#include <vector>

#include "mover/kernels.h"

namespace deputy::testing {

// Where members' buffers live: dp_malloc (mapped), registered heap memory
// (direct), or plain heap memory in staged mode (the client copies through
// bounce buffers in its pool).
enum class Memory { mapped, direct, staged };
inline const char *name(Memory m) {
    return m == Memory::mapped ? "mapped" : m == Memory::direct ? "direct" : "staged";
}
inline constexpr Memory kAllMemory[] = {Memory::mapped, Memory::direct, Memory::staged};

// Reference: rank-order reduction of `count` elements of every src block,
// with the mover's (scalar-checked) kernels.
inline std::vector<uint8_t> reduce_ref(const std::vector<const uint8_t *> &srcs, size_t count,
                                       dp_dtype_t dt, dp_op_t op) {
    const size_t n = count * dp_dtype_size(dt);
    std::vector<uint8_t> acc(srcs[0], srcs[0] + n);
    for (size_t m = 1; m < srcs.size(); ++m)
        mover::kernels::reduce(acc.data(), acc.data(), srcs[m], count, dt, op);
    return acc;
}

// The operations of the correctness matrices.
enum CollOp { kAllreduce, kReduceScatter, kAllgather, kAlltoall, kBcast, kBarrier };

// Block m of rank r's result, for int32 sum, from every rank's original
// source bytes (`orig`, n = count * 4 bytes per block).
inline std::vector<uint8_t> expected_block(CollOp op, const std::vector<std::vector<uint8_t>> &orig,
                                           int r, int m, size_t count, int root) {
    const size_t n = count * 4;
    const int p = int(orig.size());
    switch (op) {
        case kAllreduce:
        case kReduceScatter: {
            std::vector<const uint8_t *> b;
            for (int k = 0; k < p; ++k) b.push_back(orig[k].data() + (op == kReduceScatter ? r * n : 0));
            return reduce_ref(b, count, DP_INT32, DP_SUM);
        }
        case kAllgather: return orig[m];
        case kAlltoall: return {orig[m].begin() + r * n, orig[m].begin() + (r + 1) * n};
        case kBcast: return orig[root];
        case kBarrier: return {};
    }
    return {};
}

}  // namespace deputy::testing
