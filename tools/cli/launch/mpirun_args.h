// What `deputy mpirun` needs to know of the mpirun arguments it passes on:
// where each program starts (the rank shim goes right before it), which
// options name hosts (then the agents run one per host), which bind the
// ranks (--agent-cores does that itself) and how many ranks there are. Options are told
// from the program by a table of the options of Open MPI 4.1's mpirun and
// of MPICH 4's Hydra that take values (`mpirun --help all`, `mpiexec
// -help`); an option missing from it is taken for a flag, so its value
// would be taken for the program: `--option=value` avoids that.
//
// And how to give every rank an environment variable in each flavor.
#pragma once

#include <string>
#include <vector>

#include "cli/launch/mpi_flavor.h"

namespace deputy::launch {

struct MpirunCommandLine {
    // Index in the arguments of each app context's program (contexts are
    // separated by ":", as `mpirun -np 1 a : -np 2 b` runs two programs).
    std::vector<size_t> programs;
    // The host options, in Open MPI's spelling for the agents' mpirun:
    // {"--hostfile", "hosts"} for -hostfile/--hostfile/-machinefile (and
    // Hydra's -f), {"--host", "a,b"} for -H/--host (and Hydra's -hosts).
    std::vector<std::string> hosts;
    // The same options as the user wrote them, for messages.
    std::vector<std::string> hosts_as_given;
    // Options that bind the ranks to CPUs, as written (Open MPI: --bind-to,
    // --cpu-set, --cpu-list, --rankfile, --cpus-per-proc...; Hydra:
    // -bind-to, -binding), with their values.
    std::vector<std::string> binding_as_given;
    // The processes mpirun starts (the sum of every app context's -np/-n);
    // 0 when some context does not say (mpirun then fills the slots).
    int ranks = 0;
};

// False with `*error` set when no program follows the options (an option
// lacks its value, or the programs come from a file: --app, -configfile).
bool parse_mpirun_args(const std::vector<std::string> &args, MpiFlavor flavor,
                       MpirunCommandLine *out, std::string *error);

// The mpirun options that set NAME=value for every rank: {"-x",
// "NAME=value"} (Open MPI) or {"-genv", "NAME", "value"} (Hydra).
std::vector<std::string> rank_env_option(MpiFlavor flavor, const std::string &name,
                                         const std::string &value);

}  // namespace deputy::launch
