// deputy-agent-mpi: `deputy agent` for one node of an MPI job of agents
//   mpirun --map-by ppr:1:node deputy agent [agent flags]
// (`deputy agent` execs this program when an MPI launcher started it).
// Every agent flag works as for `deputy agent`, except --daemon.
//
// Several agents on one host ("simulated nodes", `mpirun -np K deputy
// agent` on one machine) each need their own socket: a "{node}" in --socket
// is replaced by the node number, and without it each agent's socket gets
// "-node<N>" before its extension (agent.sock -> agent-node1.sock).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/agent/agent_command.h"
#include "agent/mpi/mpi_internode.h"
#include "common/log.h"

namespace {

// Number of agents of this MPI job on this host.
int agents_on_this_host() {
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int n = 1;
    MPI_Comm_size(local, &n);
    MPI_Comm_free(&local);
    return n;
}

std::string socket_for_node(std::string path, int node, bool shared_host) {
    const std::string id = std::to_string(node);
    if (size_t at = path.find("{node}"); at != std::string::npos) return path.replace(at, 6, id);
    if (!shared_host) return path;
    const size_t slash = path.rfind('/');
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
        return path + "-node" + id;
    return path.substr(0, dot) + "-node" + id + path.substr(dot);
}

}  // namespace

int main(int argc, char **argv) {
    // The agent is not dumpable (agent_config.h, "dumpable"): agents that
    // share a host could not read each other's memory by cross-memory
    // attach, which Open MPI's vader and UCX would otherwise choose for
    // large messages between them, failing at the first one. Their copy
    // through shared memory instead, unless the user said otherwise.
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (!std::getenv("UCX_TLS")) setenv("UCX_TLS", "^cma", 0);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const bool shared_host = agents_on_this_host() > 1;
    deputy::tools::set_internode_factory(
        [&](deputy::agent::AgentConfig *config, std::string *error)
            -> std::unique_ptr<deputy::agent::Internode> {
            config->socket_path = socket_for_node(config->socket_path, rank, shared_host);
            deputy::agent::MpiInternode::Options options;
            options.op_timeout_ms = config->node_timeout_ms;
            options.inter_algorithm = config->inter_algorithm;
            return deputy::agent::MpiInternode::create(options, error);
        });
    CLI::App app{"deputy agent, one node of an MPI job of agents", "deputy-agent-mpi"};
    app.require_subcommand(1);
    deputy::tools::register_agent(app);
    // Parse as `deputy agent ARGS`.
    std::vector<std::string> args{"agent"};
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    std::reverse(args.begin(), args.end());
    int rc = 0;
    try {
        app.parse(args);
    } catch (const CLI::Error &e) {
        rc = app.exit(e);
    }
    MPI_Finalize();
    return rc;
}
