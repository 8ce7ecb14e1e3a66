// FNV-1a (64 bits): a digest that every process of a job computes alike
// from the same bytes, where std::hash promises nothing across builds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deputy {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;

inline uint64_t fnv1a(const void *data, size_t bytes, uint64_t h = kFnvOffset) {
    const auto *p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// A value's eight bytes, least significant first, whatever the machine's order.
inline uint64_t fnv1a_u64(uint64_t v, uint64_t h = kFnvOffset) {
    for (int k = 0; k < 8; ++k) h = (h ^ ((v >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    return h;
}

}  // namespace deputy
