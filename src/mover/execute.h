// Executing descriptors: check every field, translate every range, then run
// the kernel. Nothing is written to a destination until all checks passed,
// so an invalid descriptor leaves memory exactly as it was.
#pragma once

#include <deputy/mover.h>

#include <cstdint>

#include "mover/address_space.h"

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

namespace idxd {
class HwQueue;
}

struct ExecLimits {
    uint64_t max_transfer_size;
    uint32_t max_batch_size;
    uint64_t nt_threshold;
    // The DSA work queue this software queue's descriptors run on (the
    // device's idxd backend); nullptr: the software kernels run them.
    idxd::HwQueue *hw = nullptr;
};

// The buffers of one descriptor, translated (pointers the engine may
// access) and checked against each other.
struct Buffers {
    const void *src = nullptr;
    void *dst = nullptr;
    const void *src2 = nullptr;
    void *dst2 = nullptr;
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
