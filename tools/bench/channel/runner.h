// Runs `deputy bench channel` once options are resolved: one side (--peer)
// or both (--loopback: the connecting side is a forked child process, so the
// channel really crosses processes), then prints and writes the results.
#pragma once

#include "bench/channel/options.h"

namespace deputy::bench::channel {

// Returns the exit code (result.h): 0 OK, 1 error, 2 counts or bytes differ.
int run_command(const ChannelOptions &options, Plan &plan);

}  // namespace deputy::bench::channel
