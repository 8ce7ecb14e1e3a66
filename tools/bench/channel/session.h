// One side of `deputy bench channel`: open the channel (listen or connect),
// exchange HELLO, run the stream or the pingpong, close with END, and count.
// Every wait is bounded by the plan's timeout, so a peer that stops, dies or
// disagrees ends the run with an error or a mismatch, never a hang.
#pragma once

#include <memory>
#include <vector>

#include "bench/channel/options.h"
#include "bench/channel/result.h"
#include "channel/endpoint.h"
#include "channel/transport.h"

namespace deputy::bench::channel {

// Opens the channel as `role` (accepting on `listener` when listening; it
// may be null, then one is opened on the plan's address) and runs the side.
SideResult run_side(const Plan &plan, Role role, deputy::channel::EndpointListener *listener,
                    const std::vector<int> &cpus);

// Runs the side over a channel that is already open.
SideResult run_on(deputy::channel::Transport &transport, const Plan &plan, Role role,
                  const std::vector<int> &cpus);

}  // namespace deputy::bench::channel
