// Baseline compare and compare_pattern: 8 bytes at a time. On little-endian
// x86 the lowest set bit of a XOR of two words falls in the first differing
// byte, so one count-trailing-zeros turns a word mismatch into the exact byte.
#include <cstring>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

size_t compare_scalar(const void *a, const void *b, size_t n) {
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint64_t x = load64(pa + i) ^ load64(pb + i);
        if (x != 0) return i + static_cast<size_t>(__builtin_ctzll(x)) / 8;
    }
    for (; i < n; ++i) {
        if (pa[i] != pb[i]) return i;
    }
    return n;
}

size_t compare_pattern_scalar(const void *a, uint64_t pattern, size_t n) {
    const auto *pa = static_cast<const unsigned char *>(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint64_t x = load64(pa + i) ^ pattern;
        if (x != 0) return i + static_cast<size_t>(__builtin_ctzll(x)) / 8;
    }
    for (; i < n; ++i) {
        if (pa[i] != static_cast<unsigned char>(pattern >> (8 * (i % 8)))) return i;
    }
    return n;
}

}  // namespace

void register_compare_scalar(Table &table) {
    table.compare = compare_scalar;
    table.compare_pattern = compare_pattern_scalar;
}

}  // namespace deputy::mover::kernels
