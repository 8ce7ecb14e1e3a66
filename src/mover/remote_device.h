// A mover device hosted by another process (the agent). The C API's
// dp_mover_t is either a local Device or one of these; dp_mover_submit and
// dp_mover_wait dispatch on which. The client layer implements it (the mover
// layer knows nothing of agents); make_remote_mover wraps one in a handle.
#pragma once

#include <deputy/mover.h>

#include <memory>

namespace deputy::mover {

class RemoteDevice {
  public:
    virtual ~RemoteDevice() = default;
    virtual dp_status_t submit(uint32_t wq, const dp_desc_t &desc) = 0;
    virtual dp_status_t wait(dp_completion_t *comp, dp_wait_mode_t mode, int64_t timeout_ns) = 0;
    virtual void stats(dp_mover_stats_t *out) const = 0;
};

dp_mover_t *make_remote_mover(std::unique_ptr<RemoteDevice> remote);

}  // namespace deputy::mover
