// Uneven alltoallv layouts for the tests: a counts matrix with zeros, a
// member that sends nothing and blocks of several sizes, and per member
// displacements that place its blocks in a shuffled order with gaps
// between them (bytes an alltoallv must leave alone).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "coll/vector_counts.h"

namespace deputy::test {

struct VectorLayout {
    // counts[r][m]: elements r sends to m; per member its four arrays.
    std::vector<std::vector<size_t>> counts;
    std::vector<std::vector<size_t>> scounts, sdispls, rcounts, rdispls;
    std::vector<size_t> send_extent, recv_extent;  // elements each buffer needs
};

// Displacements for blocks of `sizes` elements in a shuffled order, each
// after a gap of 0..max_gap elements; *extent: elements up to the last end.
inline std::vector<size_t> scatter_blocks(const std::vector<size_t> &sizes, size_t max_gap,
                                          std::mt19937_64 &random, size_t *extent) {
    std::vector<size_t> order(sizes.size()), displs(sizes.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    size_t at = 0;
    for (size_t i : order) {
        at += max_gap ? random() % (max_gap + 1) : 0;
        displs[i] = at;
        at += sizes[i];
    }
    *extent = at + (max_gap ? random() % (max_gap + 1) : 0);
    return displs;
}

// max_count: the largest block; rank `silent` (if < p) sends nothing.
inline VectorLayout make_vector_layout(uint32_t p, size_t max_count, size_t max_gap,
                                       uint32_t silent, std::mt19937_64 &random) {
    VectorLayout l;
    l.counts.assign(p, std::vector<size_t>(p, 0));
    for (uint32_t r = 0; r < p; ++r)
        for (uint32_t m = 0; m < p; ++m) {
            if (r == silent) continue;
            switch (random() % 4) {
                case 0:
                    break;  // zero
                case 1:
                    l.counts[r][m] = 1 + random() % 3;
                    break;
                default:
                    l.counts[r][m] = random() % (max_count + 1);
            }
        }
    l.scounts.resize(p);
    l.sdispls.resize(p);
    l.rcounts.resize(p);
    l.rdispls.resize(p);
    l.send_extent.resize(p);
    l.recv_extent.resize(p);
    for (uint32_t r = 0; r < p; ++r) {
        l.scounts[r] = l.counts[r];
        for (uint32_t m = 0; m < p; ++m) l.rcounts[r].push_back(l.counts[m][r]);
        l.sdispls[r] = scatter_blocks(l.scounts[r], max_gap, random, &l.send_extent[r]);
        l.rdispls[r] = scatter_blocks(l.rcounts[r], max_gap, random, &l.recv_extent[r]);
    }
    return l;
}

// Member r's counts block, as the library writes it.
inline std::vector<uint64_t> counts_block(const VectorLayout &l, uint32_t r) {
    const auto p = uint32_t(l.counts.size());
    std::vector<uint64_t> block(coll::vector_counts_bytes(p) / 8);
    coll::encode_vector_counts(p, l.scounts[r].data(), l.sdispls[r].data(), l.rcounts[r].data(),
                               l.rdispls[r].data(), block.data());
    return block;
}

}  // namespace deputy::test
