// What each algorithm sends per rank, written from docs/algorithms.md's
// description rather than from the builders' loops: the sizes of the
// messages a rank sends, before chunking. Tests compare them with what the
// schedules contain and with what the executor saw go over its wires.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

#include "coll/collective.h"
#include "coll/fold.h"
#include "coll/partition.h"

namespace deputy::test {

inline std::vector<size_t> expected_message_sizes(std::string_view algorithm,
                                                  const coll::CollectiveArgs &a) {
    using coll::BlockPartition;
    using coll::Fold;
    const int p = a.size;
    const int r = a.rank;
    const size_t e = dp_dtype_size(a.dtype);
    const size_t n = a.count * e;  // the collective's n (see collective.h)
    const auto mod = [p](int i) { return static_cast<size_t>(((i % p) + p) % p); };
    std::vector<size_t> sizes;
    const auto repeat = [&](size_t times, size_t bytes) {
        sizes.insert(sizes.end(), times, bytes);
    };
    if (p == 1) return sizes;

    if (algorithm == "allreduce_ring") {
        // Reduce-scatter sends every block but r + 1, allgather every block but r + 2.
        const BlockPartition blocks(a.count, static_cast<size_t>(p), e);
        for (int i = 0; i < p; ++i) {
            if (mod(i) != mod(r + 1)) sizes.push_back(blocks.bytes(mod(i)));
            if (mod(i) != mod(r + 2)) sizes.push_back(blocks.bytes(mod(i)));
        }
    } else if (algorithm == "allreduce_recursive_doubling") {
        const Fold f(r, p);
        if (f.sits_out()) return {n};
        repeat(static_cast<size_t>(coll::floor_log2(f.p2)) + (f.in_pair() ? 1 : 0), n);
    } else if (algorithm == "allreduce_rabenseifner") {
        // Halving round m gives away the partner's aligned m blocks; doubling
        // round m sends the own aligned window of m blocks.
        const Fold f(r, p);
        if (f.sits_out()) return {n};
        const BlockPartition blocks(a.count, static_cast<size_t>(f.p2), e);
        for (int m = f.p2 / 2; m >= 1; m /= 2) {
            const int first = (f.new_rank ^ m) & ~(m - 1);
            sizes.push_back(
                blocks.bytes(static_cast<size_t>(first), static_cast<size_t>(first + m)));
        }
        for (int m = 1; m < f.p2; m *= 2) {
            const int first = f.new_rank & ~(m - 1);
            sizes.push_back(
                blocks.bytes(static_cast<size_t>(first), static_cast<size_t>(first + m)));
        }
        if (f.in_pair()) sizes.push_back(n);
    } else if (algorithm == "reduce_scatter_ring" || algorithm == "allgather_ring" ||
               algorithm == "alltoall_pairwise") {
        repeat(static_cast<size_t>(p - 1), n);
    } else if (algorithm == "allgather_recursive_doubling") {
        const Fold f(r, p);
        if (f.sits_out()) return {n};
        for (int m = 1; m < f.p2; m *= 2) {
            const int first = f.new_rank & ~(m - 1);
            sizes.push_back(
                static_cast<size_t>(f.first_covered(first + m) - f.first_covered(first)) * n);
        }
        if (f.in_pair()) sizes.push_back(static_cast<size_t>(p) * n);
    } else if (algorithm == "alltoall_bruck") {
        for (int k = 1; k < p; k *= 2) {
            size_t blocks = 0;
            for (int i = 0; i < p; ++i) blocks += (i & k) != 0 ? 1 : 0;
            sizes.push_back(blocks * n);
        }
    } else if (algorithm == "bcast_binomial") {
        const int v = static_cast<int>(mod(r - a.root));
        const int lowest = v == 0 ? 1 << coll::ceil_log2(p) : v & -v;
        for (int m = 1; m < lowest; m *= 2) {
            if (v + m < p) sizes.push_back(n);
        }
    } else if (algorithm == "bcast_chain") {
        if (static_cast<int>(mod(r - a.root)) < p - 1) sizes.push_back(n);
    } else if (algorithm == "barrier_dissemination") {
        repeat(static_cast<size_t>(coll::ceil_log2(p)), 0);
    }
    return sizes;
}

// Messages after chunking: every non-empty message is cut into pieces of
// chunk_bytes (whole elements, at least one) when the algorithm pipelines;
// empty ones are not sent, except a barrier's tokens.
inline size_t expected_messages(std::string_view algorithm, bool pipelines,
                                const coll::CollectiveArgs &a) {
    const size_t e = dp_dtype_size(a.dtype);
    size_t messages = 0;
    for (size_t bytes : expected_message_sizes(algorithm, a)) {
        if (algorithm == "barrier_dissemination") {
            ++messages;
        } else if (bytes > 0) {
            const size_t piece =
                pipelines && a.chunk_bytes > 0 ? std::max(e, a.chunk_bytes / e * e) : bytes;
            messages += (bytes + piece - 1) / piece;
        }
    }
    return messages;
}

}  // namespace deputy::test
