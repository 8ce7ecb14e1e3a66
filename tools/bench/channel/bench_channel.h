// `deputy bench channel`: DOCA's secure-channel sample done properly: N
// messages of S bytes both ways at once (or pingpong) over shm, uds or tcp,
// optionally in the secure session, with counts, timestamps and
// perftest-style rates (docs/channel.md).
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::bench {

void register_channel(CLI::App &bench);

}  // namespace deputy::bench
