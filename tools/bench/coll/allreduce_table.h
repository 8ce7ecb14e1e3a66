// --allreduce-table: the table of a published "RoCEv2 AllReduce" article
// that compares MPI's native allreduce with a ring allreduce written on MPI
// point-to-point:
//      DataSize(Bytes)         Num of float       Native Allreduce         Ring Allreduce deputy
//      Allreduce
// float32 sum, sizes 128 B to --max in x4 steps; each figure is measured as
// the article does: barrier, then three (allreduce; barrier) rounds, the
// elapsed time on rank 0 divided by 3. Two additions: the buffers are
// pre-faulted and each implementation makes one untimed call per size first
// (the article's 258 us at 128 B is mostly first-call setup), and every
// result is checked.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/coll/impl.h"
#include "bench/coll/report.h"
#include "bench/coll/session.h"

namespace deputy::bench::coll {

// Prints the table on rank 0; appends rows to *results. Returns the number
// of wrong elements (summed over ranks and implementations).
uint64_t run_allreduce_table(const World &world, const RunInfo &info, const Buffers &buffers,
                             Impl &native, Impl &ring, Impl *deputy, nlohmann::json *results);

}  // namespace deputy::bench::coll
