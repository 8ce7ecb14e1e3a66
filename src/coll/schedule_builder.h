// What algorithm files write schedules with.
//
// A builder appends steps in program order and fills in, for each, the
// dependencies implied by the bytes it touches (dependency_tracker.h) and the
// tag of each message (the n-th message between an ordered pair of ranks gets
// tag n, so both sides agree without coordination as long as they list their
// messages to each other in the same order — which a mismatch in the test
// executor would expose at once).
//
// The *_pieces helpers apply the chunk size: they split a message into
// pieces of chunk_bytes (whole elements) and do the per-piece work, so that
// piece k of a reduction only waits for piece k of its message.
#pragma once

#include <deputy/status.h>

#include <cstddef>
#include <span>
#include <vector>

#include "coll/collective.h"
#include "coll/dependency_tracker.h"
#include "coll/schedule.h"

namespace deputy::coll {

class ScheduleBuilder {
  public:
    // `args` must have passed check_args(). Sets the source and destination
    // sizes from args; scratch starts at 0 (see need_scratch).
    ScheduleBuilder(const CollectiveArgs &args, const char *algorithm);

    const CollectiveArgs &args() const { return args_; }
    int rank() const { return args_.rank; }
    int size() const { return args_.size; }
    size_t element_bytes() const { return element_bytes_; }
    // Where the input lives: the source buffer, or the destination in place.
    BufferId input() const { return args_.in_place ? BufferId::destination : BufferId::source; }

    // Grows the scratch buffer to at least `bytes`.
    void need_scratch(size_t bytes);

    // One step each. `after` adds dependencies the bytes do not imply (a
    // zero-byte token carries none); everything else is derived.
    StepId send(int peer, Region src, std::span<const StepId> after = {});
    StepId recv(int peer, Region dst, std::span<const StepId> after = {});
    StepId reduce(Region dst, Region a, Region b);  // dtype and op from args
    StepId copy(Region dst, Region src);

    // Chunked forms. A zero-byte region produces no step at all: both sides
    // of a message compute the same length, so both skip it.
    void send_pieces(int peer, Region src);
    void recv_pieces(int peer, Region dst);
    // Receives `incoming` from peer into `landing` (scratch of the same
    // length) and reduces piece by piece: dst = mine op landing, or landing
    // op mine when incoming_first (keeps a fixed operand order, see
    // reducer.h). dst may equal mine.
    void recv_reduce_pieces(int peer, Region dst, Region mine, Region landing,
                            bool incoming_first = false);
    void copy_pieces(Region dst, Region src);

    // The schedule; the builder is spent afterwards.
    Schedule finish();

  private:
    StepId add(Step step, std::span<const StepId> after);
    size_t piece_bytes(size_t total) const;

    CollectiveArgs args_;
    size_t element_bytes_;
    Schedule schedule_;
    DependencyTracker tracker_;
    std::vector<uint32_t> next_send_tag_;  // per peer
    std::vector<uint32_t> next_recv_tag_;  // per peer
    std::vector<StepId> deps_;             // reused per step
};

}  // namespace deputy::coll
