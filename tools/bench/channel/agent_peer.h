// `deputy bench channel --agent`: the listening side of the experiment runs
// inside a `deputy agent` instead of a second bench process. The bench asks
// the agent for its "bench-channel" service over the agent's control socket
// (authenticated like any client), sends its options, and gets back the
// address of a fresh listener the agent opened for this run; after the run
// the agent sends its side's result, reported like --loopback's peer.
#pragma once

#include <string>
#include <vector>

#include "bench/channel/options.h"
#include "bench/channel/result.h"
#include "common/fd.h"

namespace deputy::bench::channel {

// Client side: both sides' results (listen = the agent's, connect = ours).
std::vector<SideResult> run_via_agent(const Plan &plan, const ChannelOptions &options);

// Agent side, on its own thread: serves one run on `socket` (already
// authenticated and answered by the agent). `agent_address` places the
// run's uds/shm socket next to the agent's.
void serve_agent_peer(UniqueFd socket, const std::string &agent_address);

}  // namespace deputy::bench::channel
