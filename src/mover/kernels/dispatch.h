// Private to the kernels: the per-ISA function tables behind the public entry
// points of mover/kernels.h.
//
// Each ISA's source files register the kernels they implement into a Table;
// the dispatcher starts the AVX2 table as a copy of the scalar one and the
// AVX-512 table as a copy of the AVX2 one, so an ISA only provides what pays
// for it and inherits the rest. A call through the table is one load and one
// indirect call.
//
// Headers included by *_avx2.cc / *_avx512.cc files must not define inline
// functions that the scalar files also use: the linker keeps one copy of an
// inline function, and if it kept the one compiled with -mavx512f a CPU
// without AVX-512 would fault in scalar code. This header only declares.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mover/kernels.h"

namespace deputy::mover::kernels {

using CopyFn = void (*)(void *dst, const void *src, size_t n, Store store);
using FillFn = void (*)(void *dst, uint64_t pattern, size_t n, Store store);
using CompareFn = size_t (*)(const void *a, const void *b, size_t n);
using ComparePatternFn = size_t (*)(const void *a, uint64_t pattern, size_t n);
using DualcastFn = void (*)(void *dst1, void *dst2, const void *src, size_t n, Store store);
// One dtype x op combination: dst[i] = a[i] op b[i] for i < count.
using ReduceFn = void (*)(void *dst, const void *a, const void *b, size_t count);

struct Table {
    CopyFn copy = nullptr;
    CopyFn move = nullptr;
    FillFn fill = nullptr;
    CompareFn compare = nullptr;
    ComparePatternFn compare_pattern = nullptr;
    DualcastFn dualcast = nullptr;
    ReduceFn reduce[DP_DTYPE_COUNT][DP_OP_COUNT] = {};
};

// The AVX levels are x86-64's: cmake/SimdFlags.cmake builds their files
// only there. Elsewhere (aarch64) the scalar table is the only one.
#if defined(__x86_64__)
#define DEPUTY_KERNELS_AVX 1
#else
#define DEPUTY_KERNELS_AVX 0
#endif

// Registration, one function per ISA and concept. The scalar ones fill every
// entry; the SIMD ones overwrite the entries they speed up. A SIMD register
// function is compiled for its ISA like the rest of its file, so it may only
// be called once CPUID has shown that ISA.
void register_memory_scalar(Table &table);
void register_memory_avx2(Table &table);
void register_memory_avx512(Table &table);
void register_compare_scalar(Table &table);
void register_compare_avx2(Table &table);
void register_compare_avx512(Table &table);
void register_reduce_scalar(Table &table);
void register_reduce_avx2(Table &table);
void register_reduce_avx512(Table &table);

// The scalar reduction for (dtype, op): SIMD reductions finish their last
// partial vector with it.
ReduceFn scalar_reduce(dp_dtype_t dtype, dp_op_t op);

}  // namespace deputy::mover::kernels
