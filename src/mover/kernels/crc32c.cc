// CRC32C on ISA-L's crc32_iscsi, which picks its own SIMD (PCLMUL/CRC32)
// version at run time, so there is no per-ISA variant here.
//
// crc32_iscsi neither inverts its input nor its output: it continues the raw
// register it is given. The standard CRC32C starts the register at ~0 and
// inverts the result; inverting the seed on the way in and the register on
// the way out gives that, and makes the value chainable (a finished CRC,
// inverted, is the raw register to continue with).
#include <isa-l/crc.h>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

// crc32_iscsi takes an int length (negative lengths crash it): feed it at
// most 1 GiB at a time.
constexpr size_t kMaxCall = size_t{1} << 30;
// copy_crc32c works in chunks this size: small enough that the chunk the copy
// just read is still in L2 when the CRC reads it, large enough that the two
// calls per chunk cost nothing.
constexpr size_t kFusedChunk = 64 * 1024;

uint32_t raw_crc(uint32_t raw, const unsigned char *p, size_t n) {
    while (n > 0) {
        const size_t len = n < kMaxCall ? n : kMaxCall;
        // ISA-L's prototype lacks const; it only reads the buffer.
        raw = crc32_iscsi(const_cast<unsigned char *>(p), static_cast<int>(len), raw);
        p += len;
        n -= len;
    }
    return raw;
}

}  // namespace

uint32_t crc32c(uint32_t seed, const void *p, size_t n) {
    return ~raw_crc(~seed, static_cast<const unsigned char *>(p), n);
}

uint32_t copy_crc32c(void *dst, const void *src, size_t n, uint32_t seed, Store store) {
    auto *d = static_cast<unsigned char *>(dst);
    const auto *s = static_cast<const unsigned char *>(src);
    uint32_t raw = ~seed;
    for (size_t i = 0; i < n; i += kFusedChunk) {
        const size_t len = n - i < kFusedChunk ? n - i : kFusedChunk;
        copy(d + i, s + i, len, store);
        raw = raw_crc(raw, s + i, len);
    }
    return ~raw;
}

}  // namespace deputy::mover::kernels
