// The operations `deputy bench coll` measures, how a size in bytes maps to
// the count passed to the call, and the nccl-tests bandwidth factors.
//
// Size convention (nccl-tests, and the seed's all-to-all `-m`): the size of
// a row is the bytes of the largest buffer one rank passes:
//   allreduce, bcast    count elements
//   reduce_scatter      the input, n blocks of count elements
//   allgather           the output, n blocks of count elements
//   alltoall            each buffer, n blocks of count elements
// so a size is rounded down to a multiple of (n x element size) where blocks
// are involved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deputy::bench::coll {

enum class Coll { allreduce, reduce_scatter, allgather, alltoall, bcast, barrier };

struct OpInfo {
    const char *name;  // "iallreduce"
    Coll coll;
    bool nonblocking;
};

const OpInfo *find_op(std::string_view name);
std::string op_names();
const char *coll_name(Coll c);  // "allreduce"
bool reduces(Coll c);

// Elements in each rank's send and receive buffer for a call with `count`.
size_t send_elems(Coll c, size_t count, int ranks);
size_t recv_elems(Coll c, size_t count, int ranks);
// The count for a size in bytes (rounded down), and the size of a count.
size_t count_for_size(Coll c, uint64_t bytes, size_t elem_bytes, int ranks);
uint64_t size_of(Coll c, size_t count, size_t elem_bytes, int ranks);

// nccl-tests' busbw = algbw x factor: allreduce 2(n-1)/n; reduce_scatter,
// allgather, alltoall (n-1)/n; bcast 1; barrier 0 (no bandwidth).
double bus_factor(Coll c, int ranks);

}  // namespace deputy::bench::coll
