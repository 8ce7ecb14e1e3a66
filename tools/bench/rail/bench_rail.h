// `deputy bench rail`: multi-rail RDMA WRITE bandwidth on libfabric. A
// server writes seeded pages round-robin over R endpoints ("rails") grouped
// per device into a client's registered buffers; the client checks every
// byte. See docs/rail.md.
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::bench {

void register_rail(CLI::App &bench);

}  // namespace deputy::bench
