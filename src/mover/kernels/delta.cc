// Delta records in DSA's format: per differing 8-byte granule, a 10-byte
// entry {uint16 little-endian granule index, the 8 bytes of the new data}.
#include <cstring>
#include <vector>

#include "mover/kernels/dispatch.h"

namespace deputy::mover::kernels {
namespace {

inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

inline void put_entry(unsigned char *entry, size_t granule, const unsigned char *data) {
    entry[0] = static_cast<unsigned char>(granule);
    entry[1] = static_cast<unsigned char>(granule >> 8);
    std::memcpy(entry + 2, data, 8);
}

inline size_t entry_granule(const unsigned char *entry) {
    return static_cast<size_t>(entry[0]) | static_cast<size_t>(entry[1]) << 8;
}

}  // namespace

size_t create_delta(const void *a, const void *b, size_t n, void *record, size_t max_record) {
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    auto *out = static_cast<unsigned char *>(record);
    size_t size = 0;
    size_t offset = 0;
    while (offset < n) {
        // Dense deltas: test the next granule directly. Sparse ones: when it
        // is equal, let the SIMD compare skip the whole equal run.
        if (load64(pa + offset) == load64(pb + offset)) {
            const size_t skip = compare(pa + offset, pb + offset, n - offset);
            if (skip == n - offset) break;
            offset += skip & ~size_t{7};
        }
        if (max_record - size < DP_DELTA_ENTRY_SIZE) return SIZE_MAX;  // size <= max_record
        put_entry(out + size, offset / 8, pb + offset);
        size += DP_DELTA_ENTRY_SIZE;
        offset += 8;
    }
    return size;
}

bool apply_delta(void *dst, size_t dst_size, const void *record, size_t record_size) {
    if (record_size % DP_DELTA_ENTRY_SIZE != 0) return false;
    // The record lives in the submitter's memory, which it may rewrite while
    // we run (behind the agent: another thread of a hostile client). Read it
    // exactly once into our own memory; only the copy is checked and used,
    // so an index checked here is the index written below.
    thread_local std::vector<unsigned char> copy;
    copy.resize(record_size);
    if (record_size) std::memcpy(copy.data(), record, record_size);
    const unsigned char *in = copy.data();
    // Validate everything first: a bad record must leave dst untouched.
    const size_t granules = dst_size / 8;
    for (size_t at = 0; at < record_size; at += DP_DELTA_ENTRY_SIZE) {
        if (entry_granule(in + at) >= granules) return false;
    }
    auto *out = static_cast<unsigned char *>(dst);
    for (size_t at = 0; at < record_size; at += DP_DELTA_ENTRY_SIZE) {
        std::memcpy(out + entry_granule(in + at) * 8, in + at + 2, 8);
    }
    return true;
}

}  // namespace deputy::mover::kernels
