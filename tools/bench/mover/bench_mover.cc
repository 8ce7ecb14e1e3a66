#include "bench/mover/bench_mover.h"

namespace deputy::bench {

void register_mover(CLI::App &bench) { bench.add_subcommand("mover", "data mover benchmark"); }

}  // namespace deputy::bench
