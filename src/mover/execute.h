// Executing descriptors: check every field, translate every range, then run
// the kernel. Nothing is written to a destination until all checks passed,
// so an invalid descriptor leaves memory exactly as it was.
#pragma once

#include <deputy/mover.h>

#include <cstdint>

#include "mover/address_space.h"
#include "mover/kernels.h"

namespace deputy::mover {

struct OpResult {
    uint8_t status = DP_COMP_SUCCESS;
    uint32_t result = 0;
    uint64_t bytes = 0;
    uint64_t value = 0;
    uint64_t members = 0;  // BATCH: members given a status (for counters)
    uint64_t member_failures = 0;
    uint64_t member_bytes = 0;  // BATCH: bytes its members processed (for counters)
};

// The buffers of one descriptor, translated (pointers the engine may
// access) and checked against each other.
struct Buffers {
    const void *src = nullptr;
    void *dst = nullptr;
    const void *src2 = nullptr;
    void *dst2 = nullptr;
};

// Hardware that runs checked, translated descriptors in the kernels' place:
// a DSA work queue (idxd/hw_queue.h). Executing knows only this, so what
// links the executor alone (the descriptor fuzzer) needs no device code.
class Offload {
public:
    // Whether it takes this descriptor.
    virtual bool offloads(const dp_desc_t &d, const Buffers &b) const = 0;
    // Runs it. False when the hardware failed it: the kernels run it.
    virtual bool run(const dp_desc_t &d, const Buffers &b, kernels::Store store,
                     OpResult *out) = 0;

    // --- batches: members it runs as one batch of its own ---
    struct BatchMember {
        const dp_desc_t *desc;  // checked; its buffers translated
        Buffers buffers;
        kernels::Store store;
    };
    enum class MemberOutcome {
        done,       // results[k] holds what it did
        abandoned,  // skipped after a fenced member's failure
        again,      // it faulted (the page is now present) or failed: run it alone
    };
    // Whether a checked member can go in a batch, and how many may.
    virtual bool batchable(const dp_desc_t &d, const Buffers &b) const = 0;
    virtual uint32_t max_batch_size() const = 0;
    // Runs 2..max_batch_size() batchable members; the caller keeps the
    // mover's batch rules (records, fences, counts) with each outcome.
    virtual void run_batch(const BatchMember *members, size_t count, OpResult *results,
                           MemberOutcome *outcomes) = 0;

protected:
    ~Offload() = default;
};

struct ExecLimits {
    uint64_t max_transfer_size;
    uint32_t max_batch_size;
    uint64_t nt_threshold;
    // What runs this software queue's descriptors in the kernels' place
    // (the device's idxd backend); nullptr: the software kernels.
    Offload *hw = nullptr;
};

// True for statuses a batch counts as success.
inline bool is_success(uint8_t status) {
    return status == DP_COMP_SUCCESS || status == DP_COMP_FALSE_PREDICATE;
}

// Resolves the completion record of `desc`: nullptr when none was requested.
// Sets *ok = false when one was requested but the address is misaligned or
// refused; such a descriptor must not execute (it could never report).
dp_completion_t *resolve_completion(const dp_desc_t &desc, const AddressSpace &space, bool *ok);

// Writes the record's fields, then publishes the status with release
// ordering, waking a waiter that sleeps on it (see wait.cc).
void publish_completion(dp_completion_t *record, const OpResult &result, uint64_t user);

// Executes any descriptor except DRAIN (which needs its queue; see engine.cc).
// A BATCH runs its members in order, writing each member's record.
OpResult execute(const dp_desc_t &desc, const AddressSpace &space, const ExecLimits &limits);

}  // namespace deputy::mover
