// `deputy bench mover`: dsa_perf_micros-shaped throughput/latency benchmark
// of the data mover, with the calling core as the baseline (-m).
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::bench {

void register_mover(CLI::App &bench);

}  // namespace deputy::bench
