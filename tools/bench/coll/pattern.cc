#include "bench/coll/pattern.h"

#include <algorithm>
#include <cstring>

namespace deputy::bench::coll {
namespace {

// splitmix64's finaliser over (a, b): neighbours get unrelated values, so a
// block landing at the wrong offset or from the wrong rank is caught.
uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9e3779b97f4a7c15ull + b * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
    z ^= z >> 31;
    z *= 0xd6e8feb86659fd93ull;
    z ^= z >> 32;
    return z;
}

// Data that is only moved: 0..span-1, like the buffers the DPA all-to-all
// sample of DOCA prints.
int64_t data_value(const Dtype &t, int rank, size_t i) {
    return int64_t(mix(uint64_t(rank) + 1, i) % uint64_t(t.exact_span));
}

// The value rank `rank` contributes at element i of a reduction's input.
int64_t input_value(const Pattern &p, int rank, size_t i) {
    const Dtype &t = *p.dtype;
    switch (p.redop) {
        case DP_SUM:
            return int64_t(mix(uint64_t(rank) + 7, i) % 4) - (t.is_signed ? 1 : 0);
        case DP_PROD: {
            int64_t magnitude = mix(0, i) % uint64_t(p.ranks) == uint64_t(rank) ? 2 : 1;
            bool negative = t.is_signed && mix(uint64_t(rank) + 3, i) % 3 == 0;
            return negative ? -magnitude : magnitude;
        }
        case DP_LAND:
        case DP_LOR:
        case DP_LXOR:
            // Mostly true for land, mostly false for lor: both results occur.
            return p.redop == DP_LAND ? int64_t(mix(uint64_t(rank) + 5, i) % 5 != 0)
                                      : int64_t(mix(uint64_t(rank) + 5, i) % 5 == 0) * 3;
        case DP_BAND:
        case DP_BOR:
        case DP_BXOR:
            return int64_t(mix(uint64_t(rank) + 11, i) % 128);  // bits within every type
        case DP_MIN:
        case DP_MAX:
        case DP_MINLOC:  // (the benchmark has no pair dtype: options refuse minloc/maxloc)
        case DP_MAXLOC:
        case DP_OP_COUNT:  // min, max: negative values too where the type has them
            break;
    }
    return data_value(t, rank, i) - (t.is_signed ? t.exact_span / 2 : 0);
}

// Element i reduced over ranks 0..last, in rank order.
int64_t reduce_upto(const Pattern &p, size_t i, int last) {
    int64_t acc = input_value(p, 0, i);
    for (int q = 1; q <= last; ++q) {
        int64_t v = input_value(p, q, i);
        switch (p.redop) {
            case DP_SUM:
                acc += v;
                break;
            case DP_PROD:
                acc *= v;
                break;
            case DP_MIN:
            case DP_MINLOC:
                acc = std::min(acc, v);
                break;
            case DP_MAX:
            case DP_MAXLOC:
            case DP_OP_COUNT:
                acc = std::max(acc, v);
                break;
            case DP_LAND:
                acc = (acc != 0) && (v != 0);
                break;
            case DP_LOR:
                acc = (acc != 0) || (v != 0);
                break;
            case DP_LXOR:
                acc = (acc != 0) != (v != 0);
                break;
            case DP_BAND:
                acc &= v;
                break;
            case DP_BOR:
                acc |= v;
                break;
            case DP_BXOR:
                acc ^= v;
                break;
        }
    }
    return acc;  // (one rank: its input, as MPI gives it, not yet 0 or 1)
}

int64_t reduce_all(const Pattern &p, size_t i) { return reduce_upto(p, i, p.ranks - 1); }

// Whether `rank`'s receive buffer has a result to check: not on the
// members a rooted collective does not write, nor exscan's rank 0 (MPI
// leaves those undefined).
bool receives(const Pattern &p, int rank) {
    switch (p.coll) {
        case Coll::reduce:
        case Coll::gather:
        case Coll::gatherv:
            return rank == p.root;
        case Coll::exscan:
            return rank != 0;
        case Coll::allreduce:
        case Coll::reduce_scatter:
        case Coll::allgather:
        case Coll::alltoall:
        case Coll::alltoallv:
        case Coll::bcast:
        case Coll::barrier:
        case Coll::scatter:
        case Coll::scan:
        case Coll::allgatherv:
        case Coll::scatterv:
        case Coll::reduce_scatterv:
            return true;
    }
    return true;
}

// What element j of `rank`'s receive buffer must be.
int64_t expected(const Pattern &p, int rank, size_t j) {
    const size_t c = p.count;
    switch (p.coll) {
        case Coll::allreduce:
            return reduce_all(p, j);
        case Coll::reduce_scatter:
        case Coll::reduce_scatterv:  // equal counts: reduce_scatter's layout
            return reduce_all(p, size_t(rank) * c + j);
        case Coll::allgather:
        case Coll::allgatherv:  // equal counts: the plain forms' layouts
            return data_value(*p.dtype, int(j / c), j % c);
        case Coll::alltoall:
        case Coll::alltoallv:  // equal counts: alltoall's layout
            return data_value(*p.dtype, int(j / c), size_t(rank) * c + j % c);
        case Coll::bcast:
            return data_value(*p.dtype, p.root, j);
        case Coll::barrier:
            return 0;
        case Coll::reduce:
            return reduce_all(p, j);
        case Coll::gather:
        case Coll::gatherv:
            return data_value(*p.dtype, int(j / c), j % c);
        case Coll::scatter:
        case Coll::scatterv:
            return data_value(*p.dtype, p.root, size_t(rank) * c + j);
        case Coll::scan:
            return reduce_upto(p, j, rank);
        case Coll::exscan:
            return reduce_upto(p, j, rank - 1);
    }
    return 0;
}

}  // namespace

void fill_send(const Pattern &p, int rank, void *send) {
    const size_t n = send_elems(p.coll, p.count, p.ranks);
    if (p.coll == Coll::bcast && rank != p.root) {
        std::memset(send, kSentinel, n * p.dtype->bytes);
        return;
    }
    for (size_t i = 0; i < n; ++i) {
        int64_t v = reduces(p.coll) ? input_value(p, rank, i) : data_value(*p.dtype, rank, i);
        store(*p.dtype, send, i, v);
    }
}

void reset_recv(const Pattern &p, int rank, void *recv) {
    const size_t n = recv_elems(p.coll, p.count, p.ranks);
    if (p.coll == Coll::bcast && rank == p.root) {
        for (size_t i = 0; i < n; ++i) store(*p.dtype, recv, i, data_value(*p.dtype, rank, i));
        return;
    }
    std::memset(recv, kSentinel, n * p.dtype->bytes);
}

uint64_t count_wrong(const Pattern &p, int rank, const void *recv) {
    if (!receives(p, rank)) return 0;
    const size_t n = recv_elems(p.coll, p.count, p.ranks);
    const size_t eb = p.dtype->bytes;
    const auto *bytes = static_cast<const unsigned char *>(recv);
    uint64_t wrong = 0;
    unsigned char want[8];
    for (size_t j = 0; j < n; ++j) {
        store(*p.dtype, want, 0, expected(p, rank, j));
        if (std::memcmp(want, bytes + j * eb, eb) != 0) ++wrong;
    }
    return wrong;
}

}  // namespace deputy::bench::coll
