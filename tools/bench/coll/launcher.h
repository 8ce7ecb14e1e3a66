// `deputy bench coll` inside the deputy command: it execs deputy-bench-coll,
// the MPI program that lives next to the deputy binary, with the same
// arguments. The deputy binary itself never links MPI.
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::bench {

void register_coll(CLI::App &bench);

}  // namespace deputy::bench
