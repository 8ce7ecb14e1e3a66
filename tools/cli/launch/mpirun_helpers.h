// What `deputy mpirun` runs on the nodes, under the mpiruns it starts:
//
//   deputy mpirun --rank-shim prog args     (--nodes, --dpu-hostfile: before
//                                            each rank's program)
//     --nodes: reads the rank and the job size that mpirun gives every
//     process (OMPI_COMM_WORLD_RANK/SIZE, or PMI_RANK/PMI_SIZE under
//     Hydra) and sets DEPUTY_AGENT to its node's agent; --dpu-hostfile:
//     finds which host it runs on (host_list.h) and sets DEPUTY_AGENT to
//     that host's DPU's agent. Then LD_PRELOAD to the PMPI library, and
//     execs the program: so the shim, a deputy binary, never has the
//     library (and with it MPI) loaded itself.
//   deputy mpirun --await-agent PATH        (hostfile, DPU hostfile: once per host)
//     waits until the agent of this host listens on PATH; a "{node}" in
//     PATH is this process's rank in the probe's mpirun job, which places
//     its processes as the agents' mpirun placed the agents.
//   deputy mpirun --remove-agent-dir DIR    (hostfile: once per host)
//     removes the agent's directory of this host once the agent stopped.
#pragma once

#include <string>
#include <vector>

namespace deputy::launch {

// What the shim reads, besides the rank and size:
inline constexpr const char *kShimNodesEnv = "DEPUTY_MPIRUN_NODES";      // K
inline constexpr const char *kShimAgentEnv = "DEPUTY_MPIRUN_AGENT";      // "{node}", "{dpu}"
// --dpu-hostfile: the hosts and their DPUs, comma-separated, in pairs.
inline constexpr const char *kShimHostsEnv = "DEPUTY_MPIRUN_HOSTS";
inline constexpr const char *kShimDpusEnv = "DEPUTY_MPIRUN_DPUS";
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
