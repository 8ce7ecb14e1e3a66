// The agents of a `deputy mpirun` job as an MPI job of their own
// (docs/nodes.md), started and stopped by the launcher:
//
//  --nodes K, simulated nodes on this machine:
//    <agent mpirun> --oversubscribe -np K <deputy> agent
//        --socket <dir>/agent-node{node}.sock --token-file <dir>/token
//    ready when the K sockets exist; the token file goes then.
//  one agent per host of a hostfile or host list (the mpirun arguments'):
//    DEPUTY_TOKEN=<token> <agent mpirun> --map-by ppr:1:node <hosts>
//        -x DEPUTY_TOKEN <deputy> agent --socket <dir>/agent.sock
//    the token through the environment, since a token file would have to
//    exist on every host; ready when
//    <agent mpirun> --map-by ppr:1:node <hosts> <deputy> mpirun --await-agent <dir>/agent.sock
//    succeeds on every host. Once the agents stopped,
//    <agent mpirun> --map-by ppr:1:node <hosts> <deputy> mpirun --remove-agent-dir <dir>
//    removes the directory on every host.
//  one agent per DPU of a DPU hostfile (--dpu-hostfile), the ranks on the
//  hosts of the mpirun arguments reaching theirs over TCP:
//    DEPUTY_TOKEN=<token> <agent mpirun> --map-by ppr:1:node --hostfile <dpus>
//        -x DEPUTY_TOKEN <deputy> agent --socket <dir>/agent-dpu{node}.sock
//        --listen tcp://0.0.0.0:<port> --key <key file>
//    probed and cleaned up as the hosts' agents are, on the DPUs; an agent
//    makes its socket once it listens on the port, so the socket says both.
//
// <dir> is this machine's private directory (private_dir.h); the agent of
// another host creates its own (mode 0700, docs/agent.md). Hosts mode
// needs Open MPI's mpirun for the agents (--map-by ppr:1:node); --nodes
// works with Hydra too (-n K).
#pragma once

#include <string>
#include <vector>

#include "cli/launch/agent_process.h"
#include "cli/launch/mpi_flavor.h"
#include "cli/launch/signals.h"

namespace deputy::launch {

struct MpiAgentsSpec {
    MpiLauncher launcher;            // the agents' mpirun
    int nodes = 0;                   // > 0: K simulated nodes here; 0: one per host
    std::vector<std::string> hosts;  // Open MPI host options (mpirun_args.h)
    std::string deputy;              // this binary (the same path on every host)
    std::string config_file;         // `deputy agent --config` (on every host)
    // --dpu-hostfile: the agents run there instead, listening on `listen`
    // (tcp://0.0.0.0:PORT) with the secure session's `key_file`.
    std::string dpu_hostfile;
    std::string listen;
    std::string key_file;
    // `deputy agent --agent-cores` (each agent lays out its own host); the
    // agents' Open MPI mpirun then gets --bind-to none: the agents pin
    // themselves, where mpirun would bind each to a core of its choosing.
    std::string agent_cores;
    std::string log_file;            // keep the agents' mpirun's output here
    double startup_timeout_s = 30;
    double grace_s = 10;
    std::string tool = "deputy mpirun";
};

// A command with what it adds to the launcher's environment.
struct PlannedCommand {
    std::vector<std::string> env;  // "NAME=value"
    std::vector<std::string> argv;
};

// The agents' command for private directory `dir` and `token`.
PlannedCommand mpi_agents_command(const MpiAgentsSpec &spec, const std::string &dir,
                                  const std::string &token);
// The agents' socket: with "{node}" for the node number (--nodes, DPUs).
std::string mpi_agents_address(const MpiAgentsSpec &spec, const std::string &dir);
// The per-host probe and cleanup commands (hosts mode).
std::vector<std::string> mpi_agents_probe(const MpiAgentsSpec &spec, const std::string &dir);
std::vector<std::string> mpi_agents_cleanup(const MpiAgentsSpec &spec, const std::string &dir);

class MpiAgents {
  public:
    MpiAgents() = default;
    ~MpiAgents() { stop(); }
    MpiAgents(const MpiAgents &) = delete;
    MpiAgents &operator=(const MpiAgents &) = delete;

    // kInterrupted: a SIGINT/SIGTERM/SIGHUP came meanwhile (`*signal_out`).
    // Anything but kReady leaves nothing running and nothing on disk.
    AgentProcess::Outcome start(const MpiAgentsSpec &spec, SignalFd &signals, std::string *error,
                                int *signal_out);
    // Says once if the agents' mpirun ended while the job runs.
    void check() { agents_.check(); }
    // Stops the agents and removes their directories. Idempotent.
    void stop();

    const std::string &address() const { return address_; }
    const std::string &token() const { return token_; }

  private:
    AgentProcess::Ready ready(std::string *why);
    void cleanup_hosts();

    MpiAgentsSpec spec_;
    std::string dir_;
    std::string address_;
    std::string token_;
    AgentProcess agents_;
    AgentProcess probe_;
    bool probe_started_ = false;
    bool launched_ = false;  // the agents' mpirun was started
    bool listening_ = false;  // and every agent listened: SIGUSR1 stops them
};

}  // namespace deputy::launch
