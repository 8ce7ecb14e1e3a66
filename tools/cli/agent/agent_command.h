// `deputy agent` (run the agent, in the foreground or as a daemon) and
// `deputy info` (ask a running agent how it is doing).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "agent/agent_config.h"
#include "agent/internode.h"

namespace deputy::tools {

void register_agent(CLI::App &app);

// Set by deputy-agent-mpi (agents of several nodes as one MPI job): makes
// the agent's link to the other nodes once its config is known (it may
// adjust the socket path for simulated nodes). Without it, `deputy agent`
// started by mpirun execs deputy-agent-mpi with the same arguments.
using InternodeFactory = std::function<std::unique_ptr<agent::Internode>(
    agent::AgentConfig *config, std::string *error)>;
void set_internode_factory(InternodeFactory factory);
void register_info(CLI::App &app);

}  // namespace deputy::tools
