#include "bench_coll/collective.h"

namespace deputy::bench::coll {
namespace {

const OpInfo kOps[] = {
    {"allreduce", Coll::allreduce, false},
    {"iallreduce", Coll::allreduce, true},
    {"reduce_scatter", Coll::reduce_scatter, false},
    {"ireduce_scatter", Coll::reduce_scatter, true},
    {"allgather", Coll::allgather, false},
    {"iallgather", Coll::allgather, true},
    {"alltoall", Coll::alltoall, false},
    {"ialltoall", Coll::alltoall, true},
    {"bcast", Coll::bcast, false},
    {"ibcast", Coll::bcast, true},
    {"barrier", Coll::barrier, false},
    {"ibarrier", Coll::barrier, true},
};

bool blocked(Coll c) {
    return c == Coll::reduce_scatter || c == Coll::allgather || c == Coll::alltoall;
}

}  // namespace

const OpInfo *find_op(std::string_view name) {
    for (const OpInfo &op : kOps)
        if (name == op.name) return &op;
    return nullptr;
}

std::string op_names() {
    std::string out;
    for (const OpInfo &op : kOps) out += (out.empty() ? "" : ", ") + std::string(op.name);
    return out;
}

const char *coll_name(Coll c) {
    switch (c) {
        case Coll::allreduce:
            return "allreduce";
        case Coll::reduce_scatter:
            return "reduce_scatter";
        case Coll::allgather:
            return "allgather";
        case Coll::alltoall:
            return "alltoall";
        case Coll::bcast:
            return "bcast";
        case Coll::barrier:
            return "barrier";
    }
    return "?";
}

bool reduces(Coll c) {
    return c == Coll::allreduce || c == Coll::reduce_scatter;
}

size_t send_elems(Coll c, size_t count, int ranks) {
    switch (c) {
        case Coll::reduce_scatter:
        case Coll::alltoall:
            return count * size_t(ranks);
        case Coll::barrier:
            return 0;
        default:
            return count;
    }
}

size_t recv_elems(Coll c, size_t count, int ranks) {
    switch (c) {
        case Coll::allgather:
        case Coll::alltoall:
            return count * size_t(ranks);
        case Coll::barrier:
            return 0;
        default:
            return count;
    }
}

size_t count_for_size(Coll c, uint64_t bytes, size_t elem_bytes, int ranks) {
    if (c == Coll::barrier) return 0;
    size_t per = elem_bytes * (blocked(c) ? size_t(ranks) : 1);
    return size_t(bytes / per);
}

uint64_t size_of(Coll c, size_t count, size_t elem_bytes, int ranks) {
    if (c == Coll::barrier) return 0;
    return uint64_t(count) * elem_bytes * (blocked(c) ? uint64_t(ranks) : 1);
}

double bus_factor(Coll c, int ranks) {
    const double n = ranks;
    switch (c) {
        case Coll::allreduce:
            return 2.0 * (n - 1) / n;
        case Coll::reduce_scatter:
        case Coll::allgather:
        case Coll::alltoall:
            return (n - 1) / n;
        case Coll::bcast:
            return 1.0;
        case Coll::barrier:
            return 0.0;
    }
    return 0.0;
}

}  // namespace deputy::bench::coll
