// Blocking collectives whose threshold is `tune` (DEPUTY_MPI_TUNE=1, or
// DEPUTY_MPI_THRESHOLDS=allreduce=tune): instead of a size measured on
// another machine, each communicator measures deputy against the MPI library
// on its first calls of each size class (a power of two: bytes in
// [2^(k-1), 2^k)) and then uses the faster for every later call of that
// class (docs/mpi.md, "Tuning the blocking forms").
//
// The trial alternates the two paths, two calls each per round (the second
// timed) and the order swapped every round (timed one after the other, the
// second would pay for the first: an agent still polling the cores it
// shared); round 0 warms up (the team's first operation, pages faulted in)
// and is not timed. Then one
// allreduce over the communicator takes, for each path, the slowest rank's
// median: a collective lasts as long as its slowest member, and every member
// must choose the same path. The trial and the decision depend only on the
// sequence of collectives on the communicator, which MPI requires to be the
// same on every member, so all members run the same path at every call.
//
// A nonblocking operation's worth is the overlap it allows, which the
// library cannot time (the program computes between post and wait), so only
// the blocking forms are tuned; MPI_Alltoallv neither (the ranks' byte
// counts differ: they share no size class).
#pragma once

#include "mpi/comm_teams.h"
#include "mpi/operations.h"

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace deputy::mpi {

struct SizeClass;

// One blocking call: constructed before it runs (deciding the path, which
// may take the decision's allreduce), done() after.
class TunedCall {
  public:
    // Inert (deputy runs the call, nothing is timed) unless op's threshold
    // is kTune. ct: the communicator's team (not null).
    TunedCall(Operation op, CommTeam *ct, MPI_Comm comm, size_t bytes);
    // The MPI library runs this call (counted as passed, with the reason).
    bool to_mpi() const { return to_mpi_; }
    // Records the call's time when it is a timed trial and succeeded.
    int done(int rc);

  private:
    SizeClass *class_ = nullptr;
    bool to_mpi_ = false;
    bool timed_ = false;
    uint64_t start_ns_ = 0;
};

// A communicator's trials and decisions (CommTeam::tuning); opaque here.
struct Tuning;
void destroy_tuning(Tuning *tuning);

// The report: one line per decision this process took (text), or a JSON
// array of them.
std::string tuning_report_text(int world_rank);
std::string tuning_report_json();

}  // namespace deputy::mpi
