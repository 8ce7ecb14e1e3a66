// `--agent-cores` for a launcher (`deputy launch`, `deputy mpirun`): the
// layout on this machine (common/placement.h), what the ranks are bound
// to, and the one warning a job gets when its ranks and the agent's
// engines may run on the same CPUs.
//
// Not given, the placement is "shared" and the ranks and engines overlap:
// the launcher warns and says which layout would give the engines CPUs of
// their own. `--agent-cores shared` says the user chose it: no warning.
#pragma once

#include <string>
#include <vector>

#include "common/placement.h"
#include "common/topology.h"

namespace deputy::launch {

struct JobPlacement {
    bool requested = false;  // --agent-cores was given
    Topology topology;
    Placement placement;

    bool binds_ranks() const { return !placement.rank_slots.empty(); }
    // The CPUs the ranks may use: the layout's, or every CPU of the topology.
    std::vector<int> rank_cpus() const;
    // The private agent's engines: the layout's, or every CPU.
    std::vector<int> engine_cpus() const;
};

// `agent_cores` empty: not requested (shared). False with *error (naming
// --agent-cores) when it does not parse or does not fit this machine.
bool plan_job_placement(const std::string &agent_cores, JobPlacement *out, std::string *error);

// For the launcher to say what it does, when a layout was requested:
// "placement last (1 package, 2 cores, 2 CPUs, no SMT): the agent on CPU 1,
// the ranks on CPU 0 (2 ranks on 1 core: they share it)". `ranks` 0: unknown.
std::string describe_job_placement(const JobPlacement &p, int ranks);

// The CPUs the engines of a running agent may use, from its `deputy info`
// JSON ("placement"."engine_cpus"); every CPU of the topology when it does
// not say (an older agent).
std::vector<int> running_engine_cpus(const JobPlacement &p, const std::string &info_json);

// The warning (without the tool's name) when the ranks' CPUs and
// `engine_cpus` overlap, "" when they do not or the user asked for shared.
// `running_agent`: the address of an agent the launcher did not start
// (empty: its own, placed by the layout).
std::string overlap_warning(const JobPlacement &p, int ranks, const std::vector<int> &engine_cpus,
                            const std::string &running_agent);

}  // namespace deputy::launch
