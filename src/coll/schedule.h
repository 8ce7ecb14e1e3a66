// A schedule: what one rank does in one collective, as a small DAG of steps.
//
// Steps are stored in program order and each lists the earlier steps it must
// wait for. A runtime may start a step as soon as all of its dependencies
// have completed, in any order and with any number in flight: the
// dependencies are complete, in the sense that two steps that touch a common
// byte with at least one writing are always ordered by them (validate.h
// checks this), so every execution that respects them gives the same bytes.
//
// Semantics a runtime must provide:
//  - send(peer, tag, src): delivers src's bytes to the recv of `peer` that
//    matches it. It completes once src may be overwritten, which may be as
//    late as when the receiver has the data (rendezvous): schedules are built
//    to be deadlock free even then.
//  - recv(peer, tag, dst): completes once the matching send's bytes are in
//    dst. A send and a recv match when the sender's peer is the receiver, the
//    receiver's peer is the sender, the tags are equal, and they are the k-th
//    such send and the k-th such recv (by step index; steps with the same peer
//    and tag are ordered by dependencies, so issue order equals step order).
//    Builders give every message of a pair of ranks its own tag, so k is 1.
//    Tags restart at 0 in every schedule: a runtime with several
//    collectives of one team in flight must qualify them (by the
//    collective's sequence number, say) so their messages cannot meet.
//    The two regions have the same length; a zero-length message still
//    matches and synchronises (a barrier's token).
//  - reduce(dst, a, b, dtype, op): dst[i] = a[i] op b[i], elementwise (see
//    reducer.h); dst is either equal to a or b or disjoint from both.
//  - copy(dst, src): dst <- src; the regions do not overlap.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "coll/region.h"

namespace deputy::coll {

using StepId = uint32_t;

enum class StepKind : uint8_t { send = 0, recv, reduce, copy };
const char *step_kind_name(StepKind kind);  // "send", "recv", "reduce", "copy"

struct Step {
    StepKind kind = StepKind::copy;
    dp_dtype_t dtype = DP_UINT8;    // reduce
    dp_op_t op = DP_SUM;            // reduce
    int peer = -1;                  // send, recv: the other rank
    uint32_t tag = 0;               // send, recv
    Region dst{};                   // recv, reduce, copy: the bytes written
    Region src{};                   // send, copy: the bytes read; reduce: operand a
    Region src2{};                  // reduce: operand b
    uint32_t first_dependency = 0;  // into Schedule::dependency_list
    uint32_t dependency_count = 0;

    bool is_message() const { return kind == StepKind::send || kind == StepKind::recv; }
    // Bytes the step moves over the network (sends) or writes (others).
    size_t bytes() const { return kind == StepKind::send ? src.bytes : dst.bytes; }
};

struct Schedule {
    int rank = 0;
    int size = 1;
    const char *algorithm = "";  // "allreduce_ring", ... (static storage)
    // Bytes of each buffer the steps may touch, indexed by BufferId: the
    // runtime binds source and destination to the caller's buffers and
    // allocates scratch_bytes() of scratch.
    size_t buffer_bytes[kBufferCount] = {0, 0, 0};
    std::vector<Step> steps;
    std::vector<StepId> dependency_list;

    size_t scratch_bytes() const { return buffer_bytes[static_cast<int>(BufferId::scratch)]; }

    std::span<const StepId> dependencies(StepId id) const {
        const Step &s = steps[id];
        return {dependency_list.data() + s.first_dependency, s.dependency_count};
    }

    // Totals over the send steps: what this rank puts on the wire.
    size_t bytes_sent() const;
    size_t messages_sent() const;
};

// One line per step, for logs and test failures:
//   "#3 recv peer=1 tag=2 dst=scratch[0,+64) after 0,1"
std::string describe(const Schedule &schedule, StepId id);
std::string describe(const Schedule &schedule);  // a header line, then every step

}  // namespace deputy::coll
