// What `deputy mpirun` runs on the nodes, under the mpiruns it starts:
//
//   deputy mpirun --rank-shim prog args     (--nodes: before each rank's program)
//     reads the rank and the job size that mpirun gives every process
//     (OMPI_COMM_WORLD_RANK/SIZE, or PMI_RANK/PMI_SIZE under Hydra), sets
//     DEPUTY_AGENT to its node's agent and LD_PRELOAD to the PMPI library,
//     and execs the program: so the shim, a deputy binary, never has the
//     library (and with it MPI) loaded itself.
//   deputy mpirun --await-agent PATH        (hostfile: once per host)
//     waits until the agent of this host listens on PATH.
//   deputy mpirun --remove-agent-dir DIR    (hostfile: once per host)
//     removes the agent's directory of this host once the agent stopped.
#pragma once

#include <string>
#include <vector>

namespace deputy::launch {

// What the shim reads, besides the rank and size:
inline constexpr const char *kShimNodesEnv = "DEPUTY_MPIRUN_NODES";      // K
inline constexpr const char *kShimAgentEnv = "DEPUTY_MPIRUN_AGENT";      // with "{node}"
inline constexpr const char *kShimPreloadEnv = "DEPUTY_MPIRUN_PRELOAD";  // LD_PRELOAD's value

// Block mapping of ranks to the K simulated nodes: rank r of `size` uses
// node r * K / size (rounded down), so each node gets a run of
// consecutive ranks and the runs differ in length by at most one.
int node_of_rank(long rank, long size, int nodes);

// Each returns the process's exit code (the shim returns only on error).
int run_rank_shim(const std::vector<std::string> &command);
int await_agent(const std::string &socket, double timeout_s);
int remove_agent_dir(const std::string &dir);

}  // namespace deputy::launch
