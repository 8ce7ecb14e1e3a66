// What every rank sends and what it must receive, as functions of (rank,
// element index), so any rank can check its own result with no extra
// communication (nccl-tests' #wrong: elements that differ from the expected
// bytes, summed over ranks).
//
// Values are small integers every type holds exactly, so a reduction gives
// the same bytes in any order and on any implementation:
//   allreduce / reduce_scatter, sum:  0..3 (-1..2 for signed types and floats)
//   prod:  +-1, with exactly one rank contributing +-2 per element
//   min / max: -span/2..span/2-1 (0..span-1 unsigned), span = Dtype::exact_span
//   the data of allgather / alltoall / bcast: 0..span-1
// Integer results wrap like deputy's and MPI's integer arithmetic.
#pragma once

#include <deputy/mover.h>

#include <cstddef>
#include <cstdint>

#include "bench/coll/collective.h"
#include "bench/coll/dtype.h"

namespace deputy::bench::coll {

struct Pattern {
    Coll coll = Coll::allreduce;
    const Dtype *dtype = nullptr;
    dp_op_t redop = DP_SUM;
    int ranks = 1;
    int root = 0;
    size_t count = 0;
};

// Bytes 0xff: NaN for the floats, -1 / max for the integers; no pattern
// produces it, so an element nobody wrote is always wrong.
constexpr unsigned char kSentinel = 0xff;

// The send buffer of `rank`; for bcast, the root's data (others: sentinel).
void fill_send(const Pattern &p, int rank, void *send);
// Before a checked run: the receive buffer full of sentinel; for bcast, the
// buffer the call uses, so the root's holds its data.
void reset_recv(const Pattern &p, int rank, void *recv);
// Elements of `recv` that differ from what `rank` must hold after the call.
uint64_t count_wrong(const Pattern &p, int rank, const void *recv);

}  // namespace deputy::bench::coll
