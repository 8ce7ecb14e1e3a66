// The operations `deputy bench coll` measures (each collective blocking and
// non-blocking), and how a row's size in bytes maps to the count passed to
// the call. What a collective reads, writes and reduces, its name and its
// bus-bandwidth factor come from the one table, coll/collective.h.
//
// Size convention (nccl-tests): the size of a row is the bytes of the
// largest buffer one rank passes:
//   allreduce, bcast    count elements
//   reduce_scatter      the input, n blocks of count elements
//   allgather           the output, n blocks of count elements
//   alltoall            each buffer, n blocks of count elements
//   alltoallv           likewise, with equal counts (every scounts and
//                       rcounts entry = count, displacements m x count)
// so a size is rounded down to a multiple of (n x element size) where blocks
// are involved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "coll/collective.h"

namespace deputy::bench::coll {

using Coll = ::deputy::coll::Collective;

struct OpInfo {
    std::string name;  // "iallreduce"
    Coll coll;
    bool nonblocking;
};

const OpInfo *find_op(std::string_view name);
std::string op_names();
// collective_name(c) and reduces(c) are the table's (found by argument-
// dependent lookup).

// Whether a buffer of the collective holds one block per member.
bool blocked(Coll c);
// Elements in each rank's send and receive buffer for a call with `count`
// (bcast: the one buffer, both).
size_t send_elems(Coll c, size_t count, int ranks);
size_t recv_elems(Coll c, size_t count, int ranks);
// The count for a size in bytes (rounded down), and the size of a count.
size_t count_for_size(Coll c, uint64_t bytes, size_t elem_bytes, int ranks);
uint64_t size_of(Coll c, size_t count, size_t elem_bytes, int ranks);

// nccl-tests' busbw = algbw x factor (the table's).
inline double bus_factor(Coll c, int ranks) {
    return ::deputy::coll::collective_info(c).bus_factor.of(ranks);
}
// The factor as nccl-tests writes it, for the table notes.
inline const char *bus_formula(Coll c) { return ::deputy::coll::collective_info(c).bus_factor.formula; }

}  // namespace deputy::bench::coll
