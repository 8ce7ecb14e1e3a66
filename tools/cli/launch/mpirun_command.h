// `deputy mpirun [deputy options] [--] [mpirun arguments] program [args]`:
// run an unmodified MPI program under mpirun with deputy's agents and its
// PMPI library preloaded into every rank (docs/launch.md).
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::tools {

void register_mpirun(CLI::App &app);

// CLI11 (2.1) cannot hand a subcommand what follows a `--` in order, so
// main() calls this first: when argv is `deputy mpirun [its options] --
// rest`, it keeps `rest` for the command and returns the index of the
// `--` (CLI11 parses only what comes before); otherwise returns argc.
int split_mpirun_arguments(int argc, char **argv);

}  // namespace deputy::tools
