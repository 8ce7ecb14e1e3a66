// A STAGED request on the engines. The service thread decodes and checks
// the message, makes it a StagedJob and submits one descriptor under the
// agent's own address space, StagedSpace, whose run() executes the job on
// the engine that takes it (the client's bytes on bounce buffers) and
// encodes the answer. The service thread sends that answer once the job's
// record completes: it never runs a staged descriptor's bytes itself.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <vector>

#include "channel/control.h"
#include "mover/address_space.h"
#include "mover/execute.h"

namespace deputy::agent {

// Owned by the agent (not by the client's session): it lives until its
// record completes, whether or not the client is still there.
struct StagedJob {
    uint32_t client_id = 0;
    uint32_t wq = 0;  // the device queue it goes to (its client's)
    bool submitted = false;
    // Read by the engine.
    channel::control::Staged message;
    mover::ExecLimits limits{};
    uint64_t max_bytes = 0;  // bounce bytes for one descriptor
    // Written by the engine before it publishes `record`.
    std::vector<uint8_t> reply;  // the encoded StagedResult
    uint8_t status = DP_COMP_SUCCESS;  // the staged descriptor's status
    // The job's own record (agent memory): non-zero once the engine is done
    // with everything above.
    dp_completion_t record{};

    // The descriptor that runs this job on an engine (StagedSpace::run).
    dp_desc_t descriptor() const;
    bool done() const { return __atomic_load_n(&record.status, __ATOMIC_ACQUIRE) != 0; }
};

// The agent's address space for staged jobs: a descriptor's src is a
// StagedJob. Addresses translate to nothing; only the agent submits here.
class StagedSpace final : public mover::AddressSpace {
  public:
    void *translate(uint64_t, uint64_t, mover::Access) const override { return nullptr; }
    bool run(const dp_desc_t &desc, const mover::ExecLimits &limits,
             mover::OpResult *result) const override;
};

}  // namespace deputy::agent
