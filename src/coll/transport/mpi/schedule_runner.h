// Runs one rank's Schedule (coll/schedule.h) over MPI point-to-point,
// without ever blocking: start(), then progress() until it says done. Many
// runners may be in flight on one communicator at once (collectives of
// several teams, chunks of one), from one thread.
//
// Messages: a send step is MPI_Isend, a recv step MPI_Irecv, of the step's
// bytes, to the peer's rank in the communicator (rank_map[peer], or peer).
// Tags: a schedule numbers its messages from 0; the runner sends step tag t
// as MPI tag tag_base + t, so runners in flight together must use disjoint
// ranges [tag_base, tag_base + tag_span()) — the caller picks tag_base,
// below MPI_TAG_UB (at least 32767). Zero-byte messages are sent as such
// and still match (a barrier's tokens).
// Reduce steps use the mover's kernels (KernelReducer), copy steps memcpy.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "coll/reducer.h"
#include "coll/schedule.h"

namespace deputy::coll::mpi {

class ScheduleRunner {
  public:
    // `schedule` must outlive the runner. source may be null when the
    // schedule reads none (in place); scratch is allocated here.
    ScheduleRunner(const Schedule &schedule, MPI_Comm comm, void *source, void *destination,
                   int tag_base, std::vector<int> rank_map = {});
    // One more than the largest tag the schedule uses.
    static int tag_span(const Schedule &schedule);

    void start();
    // Posts every step whose dependencies completed, tests the messages in
    // flight. True once every step completed, or on an MPI error (error()).
    bool progress();
    bool failed() const { return !error_.empty(); }
    const std::string &error() const { return error_; }

  private:
    void run_ready();
    void complete(StepId id);
    uint8_t *address(const Region &r);

    const Schedule &s_;
    MPI_Comm comm_;
    int tag_base_;
    std::vector<int> rank_map_;
    uint8_t *buffers_[kBufferCount] = {nullptr, nullptr, nullptr};
    std::vector<uint8_t> scratch_;
    std::vector<uint32_t> waiting_;                // unmet dependencies per step
    std::vector<std::vector<StepId>> dependents_;  // steps that wait for each step
    std::vector<StepId> ready_;
    std::vector<MPI_Request> requests_;  // in flight, with their steps
    std::vector<StepId> request_steps_;
    size_t done_ = 0;
    std::string error_;
    KernelReducer reducer_;
};

}  // namespace deputy::coll::mpi
