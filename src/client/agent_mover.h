// The agent-hosted mover as a RemoteDevice: submit pushes into this
// process's ring in the segment and rings the doorbell only when the agent
// sleeps; staged mode sends the descriptor with its bytes instead and
// completes it before returning. Waits sleep in slices so a dead agent is
// noticed within the context's lost timeout.
#pragma once

#include <atomic>

#include "client/context.h"
#include "mover/remote_device.h"

namespace deputy::client {

class AgentMover final : public mover::RemoteDevice {
  public:
    explicit AgentMover(Context *ctx) : ctx_(ctx) { ctx_->open_movers().fetch_add(1); }
    ~AgentMover() override { ctx_->open_movers().fetch_sub(1); }

    dp_status_t submit(uint32_t wq, const dp_desc_t &desc) override;
    dp_status_t wait(dp_completion_t *comp, dp_wait_mode_t mode, int64_t timeout_ns) override;
    void stats(dp_mover_stats_t *out) const override;

  private:
    dp_status_t submit_staged(const dp_desc_t &desc);

    Context *ctx_;
    std::atomic<uint64_t> retries_{0};
};

}  // namespace deputy::client
