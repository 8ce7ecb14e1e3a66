// The implementations a run measures side by side on the same buffers:
// deputy (the agent does the work), mpi (the MPI library's own collective,
// blocking or non-blocking), ring (a ring allreduce written on MPI
// point-to-point) and sched (deputy's src/coll schedule run by the host
// ranks). One outstanding non-blocking operation at a time.
#pragma once

#include <deputy/coll.h>
#include <mpi.h>

#include <memory>
#include <string>

#include "bench/coll/collective.h"
#include "bench/coll/dtype.h"

namespace deputy::bench::coll {

struct CallArgs {
    const void *send = nullptr;
    void *recv = nullptr;  // bcast: the buffer
    size_t count = 0;      // elements, per block where there are blocks
    const Dtype *dtype = nullptr;
    dp_op_t redop = DP_SUM;
    int root = 0;
};

class Impl {
  public:
    virtual ~Impl() = default;
    virtual const char *name() const = 0;
    // Empty if this implementation can run `coll` with these arguments,
    // else why not (shown in the table instead of figures).
    virtual std::string unsupported(Coll coll, bool nonblocking, const CallArgs &a) const = 0;
    // false on failure, with error() saying why.
    virtual bool run(Coll coll, const CallArgs &a) = 0;   // blocking
    virtual bool post(Coll coll, const CallArgs &a) = 0;  // non-blocking start
    virtual bool test(bool *done) = 0;
    virtual bool wait() = 0;
    // What ran, where the implementation chooses (an algorithm's name).
    virtual std::string detail() const { return {}; }
    const std::string &error() const { return error_; }

  protected:
    std::string error_;
};

std::unique_ptr<Impl> make_deputy_impl(dp_team_t *team);
std::unique_ptr<Impl> make_mpi_impl(MPI_Comm comm);
std::unique_ptr<Impl> make_ring_impl(MPI_Comm comm);
// src/coll's schedule run by the host ranks ("" = the selector's choice).
std::unique_ptr<Impl> make_schedule_impl(MPI_Comm comm, const std::string &algorithm);

}  // namespace deputy::bench::coll
