#include "cli/launch/mpirun_command.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/cli_common.h"
#include "common/log.h"
#include "channel/key_file.h"
#include "channel/team_board.h"
#include "cli/launch/host_list.h"
#include "cli/launch/job.h"
#include "cli/launch/job_agent.h"
#include "cli/launch/job_placement.h"
#include "cli/launch/mpi_binding.h"
#include "cli/launch/mpi_agents.h"
#include "cli/launch/mpi_flavor.h"
#include "cli/launch/mpi_library.h"
#include "cli/launch/mpi_operations.h"
#include "cli/launch/mpirun_args.h"
#include "cli/launch/mpirun_helpers.h"
#include "cli/launch/signals.h"
#include "cli/launch/spawn.h"

extern char **environ;

namespace deputy::tools {
namespace {

using launch::MpiFlavor;
using launch::PlannedCommand;

constexpr const char *kTool = "deputy mpirun";
// Placeholders of the dry run: what only a real run makes.
constexpr const char *kDirPlaceholder = "<dir>";
constexpr const char *kTokenPlaceholder = "<token>";

struct MpirunFlags {
    std::string mpirun = "mpirun";
    std::string agent_mpirun = "mpirun";
    std::string mpi_lib;
    int nodes = 0;
    bool dry_run = false;
    bool verbose = false;
    std::string agent_config;
    std::string agent_log;
    std::string agent_cores;
    double agent_timeout_s = 30;
    double grace_s = 10;
    double version_timeout_s = 10;
    // What deputy mpirun runs on the nodes (mpirun_helpers.h); hidden.
    bool rank_shim = false;
    bool operations = false;
    bool p2p = false;
    bool baseline = false;
    bool no_preload = false;
    std::string dpu_hostfile;
    std::string key_file;
    int dpu_port = 7790;
    std::string memory;
    std::string fabric_provider;
    std::string await_agent;
    std::string remove_agent_dir;
};

// What follows `--` (split_mpirun_arguments).
std::vector<std::string> g_after_separator;

void add_options(CLI::App *cmd, MpirunFlags *f) {
    cmd->add_option("--mpirun", f->mpirun,
                    "the MPI launcher that runs the program (Open MPI's mpirun or MPICH's "
                    "Hydra, told apart by its --version)")
        ->capture_default_str();
    cmd->add_option("--mpi-lib", f->mpi_lib,
                    "the PMPI library to preload (default: libdeputy-mpi-<openmpi|mpich>.so "
                    "beside the build tree or in the install libdir)");
    cmd->add_option("--nodes", f->nodes,
                    "simulate K nodes on this machine: K agents as one MPI job; rank r of S uses "
                    "node r*K/S (block mapping)")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--agent-mpirun", f->agent_mpirun,
                    "with --nodes or a hostfile: the mpirun that starts the agents (the MPI "
                    "deputy-agent-mpi is built with)")
        ->capture_default_str();
    cmd->add_option("--agent-config", f->agent_config,
                    "config file for the agents (`deputy agent --config`; with a hostfile it "
                    "must exist on every host)");
    cmd->add_option("--agent-log", f->agent_log,
                    "keep the agents' output in this file (otherwise shown only when they fail)");
    cmd->add_option("--agent-cores", f->agent_cores,
                    "placement: last (the last core of each socket for the agent, the ranks bound "
                    "to the others with mpirun's own options), N (cores), cpus:LIST, smt (the "
                    "agent on the SMT siblings of the ranks' cores) or shared (nothing pinned, the "
                    "default, with a warning unless given); docs/launch.md");
    cmd->add_option("--agent-timeout", f->agent_timeout_s,
                    "seconds to wait for every agent to listen")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_option("--grace", f->grace_s,
                    "seconds between SIGTERM and SIGKILL when stopping mpirun or the agents")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd->add_flag("--dry-run", f->dry_run,
                  "print the commands and environment it would run, and run nothing");
    cmd->add_flag("-v,--verbose", f->verbose, "say what it does, on stderr");
    cmd->add_flag("--operations", f->operations,
                  "list the MPI operations the library intercepts, with their "
                  "DEPUTY_MPI_THRESHOLDS names and default thresholds, and run nothing");
    cmd->add_flag("--p2p", f->p2p,
                  "offload point-to-point too (DEPUTY_MPI_P2P=1): every message on the "
                  "communicators the library serves goes through deputy (docs/mpi.md)");
    cmd->add_flag("--baseline", f->baseline,
                  "plain MPI in the same placement: mpirun with the ranks bound as --agent-cores "
                  "binds them, no agent, no library (what a deputy run compares with)");
    cmd->add_flag("--no-preload", f->no_preload,
                  "start the agent and give the ranks DEPUTY_AGENT, but preload no library: for "
                  "programs that call deputy's C API themselves (deputy bench coll)");
    cmd->add_option("--dpu-hostfile", f->dpu_hostfile,
                    "run the agents on DPUs (or any other hosts): line i of FILE serves the i-th "
                    "host of the mpirun arguments' hostfile or host list; the ranks reach it over "
                    "TCP in the secure session (docs/launch.md)");
    cmd->add_option("--key", f->key_file,
                    "with --dpu-hostfile: the secure session's key file (`deputy bench channel "
                    "--keygen FILE`), at this path on every host and DPU (default: $DEPUTY_KEY)");
    cmd->add_option("--dpu-port", f->dpu_port,
                    "with --dpu-hostfile: the TCP port the agents listen on")
        ->check(CLI::Range(1, 65535))
        ->capture_default_str();
    cmd->add_option("--memory", f->memory,
                    "with --dpu-hostfile: how the agents reach the ranks' buffers: staged (the "
                    "bytes travel in the session, the default) or rdma (the agents read and "
                    "write them with libfabric RMA; DEPUTY_MEMORY)")
        ->check(CLI::IsMember({"staged", "rdma"}));
    cmd->add_option("--fabric-provider", f->fabric_provider,
                    "with --memory rdma: the libfabric provider (tcp, verbs, efa; "
                    "DEPUTY_FABRIC_PROVIDER; default tcp)");
    cmd->add_flag("--rank-shim", f->rank_shim)->group("");
    cmd->add_option("--await-agent", f->await_agent)->group("");
    cmd->add_option("--remove-agent-dir", f->remove_agent_dir)->group("");
}

enum class AgentsMode { kPrivate, kNodes, kHosts, kDpus };

struct Plan {
    launch::MpiLauncher launcher;
    std::string library;
    launch::MpirunCommandLine command_line;
    AgentsMode mode = AgentsMode::kPrivate;
    launch::AgentOptions private_agent;  // kPrivate
    launch::MpiAgentsSpec mpi_agents;    // kNodes, kHosts
    std::string deputy;                  // this binary
    launch::JobPlacement placement;      // --agent-cores on this machine
    std::vector<std::string> binding;    // mpirun's options binding the ranks to it
    std::vector<std::string> sharing;    // ... and making ranks that share a CPU yield it
    bool p2p = false;                    // --p2p: DEPUTY_MPI_P2P=1 for the ranks
    // --baseline: no agents, nothing for the ranks but the binding;
    // --no-preload: the agents, and no library (`library` empty).
    bool baseline = false;
    // kDpus: host i (of the mpirun arguments) is served by the agent of
    // DPU i, at tcp://<DPU i>:<port>, in the secure session of `key_file`.
    std::vector<std::string> host_names;
    std::vector<std::string> dpu_names;
    int dpu_port = 0;
    std::string key_file;
    std::string memory;           // DEPUTY_MEMORY for the ranks, if given
    std::string fabric_provider;  // DEPUTY_FABRIC_PROVIDER, if given
};

// --dpu-hostfile: the hosts, their DPUs and the key, checked before
// anything starts.
bool plan_dpus(const MpirunFlags &f, Plan *p, std::string *error) {
    if (p->command_line.hosts.empty()) {
        *error = "--dpu-hostfile pairs each DPU with a host of the mpirun arguments' hostfile or "
                 "host list (--hostfile, -H; Hydra -f, -hosts), and they give none";
        return false;
    }
    if (!launch::read_host_names(p->command_line.hosts, &p->host_names, error) ||
        !launch::read_hostfile(f.dpu_hostfile, false, &p->dpu_names, error))
        return false;
    if (p->host_names.size() != p->dpu_names.size()) {
        *error = "--dpu-hostfile " + f.dpu_hostfile + " names " +
                 std::to_string(p->dpu_names.size()) + " DPU(s) and the mpirun arguments (" +
                 launch::command_line(p->command_line.hosts_as_given) + ") " +
                 std::to_string(p->host_names.size()) +
                 " host(s): line i of the DPU hostfile serves the i-th host";
        return false;
    }
    for (const std::string &name : p->dpu_names)
        if (name.find(':') != std::string::npos || name.find(',') != std::string::npos) {
            *error = "--dpu-hostfile " + f.dpu_hostfile + ": '" + name +
                     "': give DPUs by host name or IPv4 address";
            return false;
        }
    std::string key = f.key_file;
    if (key.empty() && std::getenv("DEPUTY_KEY")) key = std::getenv("DEPUTY_KEY");
    if (key.empty()) {
        *error = "--dpu-hostfile: the ranks reach their DPU's agent in the secure session, which "
                 "needs a key file: --key FILE or DEPUTY_KEY (`deputy bench channel --keygen "
                 "FILE` makes one; it must be at the same path on every host and DPU)";
        return false;
    }
    channel::secure::Key loaded;
    if (const dp_status_t s = channel::secure::load_key_file(key, &loaded); s != DP_OK) {
        const char *why = s == DP_ERR_DENIED  ? "group or others may access it (chmod 600)"
                          : s == DP_ERR_INVALID ? "not a key file"
                                                : "cannot be read";
        *error = "--key " + key + ": " + why + " (" + dp_status_name(s) +
                 "); a key file as `deputy bench channel --keygen FILE` makes it holds one line "
                 "\"deputy-psk-v1 <64 hex digits>\", mode 0600";
        return false;
    }
    p->key_file = std::filesystem::absolute(key).lexically_normal().string();
    p->dpu_port = f.dpu_port;
    p->memory = f.memory;
    p->fabric_provider = f.fabric_provider;
    return true;
}

// Everything decided before anything starts; false with `*error` (and
// `*code`, the exit code) when the job cannot run.
bool make_plan(const MpirunFlags &f, const std::vector<std::string> &args, Plan *p,
               std::string *error, int *code) {
    *code = 1;
    p->deputy = launch::self_path();
    p->p2p = f.p2p;
    p->baseline = f.baseline;
    if (f.baseline || f.no_preload) {
        const char *flag = f.baseline ? "--baseline" : "--no-preload";
        const std::vector<std::pair<bool, const char *>> others = {
            {f.baseline && f.no_preload, "--no-preload"},
            {f.p2p, "--p2p"},
            {!f.mpi_lib.empty(), "--mpi-lib"},
            {f.baseline && f.nodes > 0, "--nodes"},
            {f.baseline && !f.agent_config.empty(), "--agent-config"},
            {f.baseline && !f.agent_log.empty(), "--agent-log"},
            {!f.dpu_hostfile.empty(), "--dpu-hostfile"}};
        for (const auto &[given, name] : others)
            if (given) {
                *error = std::string(flag) +
                         (f.baseline ? " runs plain MPI (no agent, no library)"
                                     : " preloads no library") +
                         ": " + name + " does not go with it";
                return false;
            }
    }
    const std::string mpirun = launch::find_program(f.mpirun);
    if (mpirun.empty()) {
        *error = "cannot find the MPI launcher '" + f.mpirun + "' in PATH (--mpirun PATH)";
        *code = 127;
        return false;
    }
    if (!launch::identify_mpi_launcher(mpirun, f.version_timeout_s, &p->launcher, error))
        return false;
    if (!launch::parse_mpirun_args(args, p->launcher.flavor, &p->command_line, error)) return false;
    const bool hosts = !p->command_line.hosts.empty();
    if (f.nodes > 0 && hosts) {
        *error =
            "--nodes simulates nodes on this machine; it does not go with the host options "
            "in the mpirun arguments (" +
            launch::command_line(p->command_line.hosts_as_given) + ")";
        return false;
    }
    if (!f.dpu_hostfile.empty() && f.nodes > 0) {
        *error = "--nodes simulates nodes on this machine; it does not go with --dpu-hostfile";
        return false;
    }
    if (f.dpu_hostfile.empty() && (!f.memory.empty() || !f.fabric_provider.empty())) {
        *error = std::string(f.memory.empty() ? "--fabric-provider" : "--memory") +
                 " is for ranks whose agent runs on a DPU (--dpu-hostfile): a local agent "
                 "reaches their memory directly";
        return false;
    }
    p->mode = !f.dpu_hostfile.empty() ? AgentsMode::kDpus
              : f.nodes > 0           ? AgentsMode::kNodes
              : hosts                 ? AgentsMode::kHosts
                                      : AgentsMode::kPrivate;
    if (p->mode == AgentsMode::kDpus && !plan_dpus(f, p, error)) return false;
    if (!launch::plan_job_placement(f.agent_cores, &p->placement, error)) return false;
    // On DPUs the agents take none of the hosts' CPUs: the ranks stay unbound.
    const bool bind_ranks = p->mode != AgentsMode::kDpus;
    // With a hostfile, Hydra's list holds the ranks of one host, which
    // deputy does not know: one entry per slot (mpi_binding.h).
    if (bind_ranks) {
        p->binding = launch::mpi_binding_options(p->launcher.flavor, p->placement.topology,
                                                 p->placement.placement,
                                                 hosts ? 0 : p->command_line.ranks);
        p->sharing = launch::mpi_shared_slot_options(p->launcher.flavor, p->placement.placement,
                                                     hosts ? 0 : p->command_line.ranks);
    }
    if (!p->binding.empty() && !p->command_line.binding_as_given.empty()) {
        *error = "--agent-cores " + f.agent_cores + " binds the ranks (" +
                 launch::command_line(p->binding) + "); the mpirun arguments bind them too (" +
                 launch::command_line(p->command_line.binding_as_given) +
                 "): leave one of the two out";
        return false;
    }

    if (f.baseline || f.no_preload) {
        // No library.
    } else if (!f.mpi_lib.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(f.mpi_lib, ec)) {
            *error = "--mpi-lib " + f.mpi_lib + ": no such file";
            return false;
        }
        // The ranks may run elsewhere (-wdir, other hosts): an absolute path.
        p->library = std::filesystem::absolute(f.mpi_lib).lexically_normal().string();
    } else {
        p->library = launch::find_mpi_library(p->launcher.flavor, error);
        if (p->library.empty()) return false;
    }
    if (!f.agent_config.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(f.agent_config, ec)) {
            *error = "--agent-config " + f.agent_config + ": no such file";
            return false;
        }
    }
    const std::string agent_config =
        f.agent_config.empty()
            ? std::string()
            : std::filesystem::absolute(f.agent_config).lexically_normal().string();

    if (p->mode == AgentsMode::kPrivate) {
        launch::AgentOptions &o = p->private_agent;
        o.config_file = agent_config;
        o.agent_cores = f.agent_cores;
        o.log_file = f.agent_log;
        o.startup_timeout_s = f.agent_timeout_s;
        o.grace_s = f.grace_s;
        o.tool = kTool;
        o.dir_prefix = "deputy-mpirun-";
        o.use_running = false;
        return true;
    }
    launch::MpiAgentsSpec &s = p->mpi_agents;
    const std::string agent_mpirun = launch::find_program(f.agent_mpirun);
    if (agent_mpirun.empty()) {
        *error = "cannot find the agents' MPI launcher '" + f.agent_mpirun +
                 "' in PATH (--agent-mpirun PATH)";
        *code = 127;
        return false;
    }
    if (agent_mpirun == mpirun) {
        s.launcher = p->launcher;
    } else if (!launch::identify_mpi_launcher(agent_mpirun, f.version_timeout_s, &s.launcher,
                                              error)) {
        *error = "--agent-mpirun: " + *error;
        return false;
    }
    if (p->mode != AgentsMode::kNodes && s.launcher.flavor != MpiFlavor::kOpenMpi) {
        *error =
            std::string(p->mode == AgentsMode::kDpus ? "one agent per DPU" : "one agent per host") +
            " needs Open MPI's mpirun for the agents (--map-by ppr:1:node); --agent-mpirun " +
            agent_mpirun + " is " + s.launcher.version;
        return false;
    }
    s.nodes = f.nodes;
    s.hosts = p->command_line.hosts;
    s.deputy = p->deputy;
    s.config_file = agent_config;
    s.agent_cores = f.agent_cores;
    s.log_file = f.agent_log;
    s.startup_timeout_s = f.agent_timeout_s;
    s.grace_s = f.grace_s;
    s.tool = kTool;
    if (p->mode == AgentsMode::kDpus) {
        s.dpu_hostfile = std::filesystem::absolute(f.dpu_hostfile).lexically_normal().string();
        s.listen = "tcp://0.0.0.0:" + std::to_string(p->dpu_port);
        s.key_file = p->key_file;
    }
    return true;
}

// What deputy gives every rank (nothing with --baseline).
std::vector<std::pair<std::string, std::string>> rank_env(const Plan &p, const std::string &agent,
                                                          const std::string &token) {
    std::vector<std::pair<std::string, std::string>> env;
    if (p.baseline) return env;
    std::string preload = p.library;
    if (const char *old = std::getenv("LD_PRELOAD"); old && *old)
        preload += (preload.empty() ? "" : ":") + std::string(old);
    if (p.mode == AgentsMode::kNodes) {
        env.emplace_back(launch::kShimNodesEnv, std::to_string(p.mpi_agents.nodes));
        env.emplace_back(launch::kShimAgentEnv, agent);
        env.emplace_back(launch::kShimPreloadEnv, preload);
    } else if (p.mode == AgentsMode::kDpus) {
        env.emplace_back(launch::kShimHostsEnv, launch::comma_text(p.host_names));
        env.emplace_back(launch::kShimDpusEnv, launch::comma_text(p.dpu_names));
        env.emplace_back(launch::kShimAgentEnv, "tcp://{dpu}:" + std::to_string(p.dpu_port));
        env.emplace_back(launch::kShimPreloadEnv, preload);
        env.emplace_back("DEPUTY_KEY", p.key_file);
        if (!p.memory.empty()) env.emplace_back("DEPUTY_MEMORY", p.memory);
        if (!p.fabric_provider.empty())
            env.emplace_back("DEPUTY_FABRIC_PROVIDER", p.fabric_provider);
    } else {
        if (!p.library.empty()) env.emplace_back("LD_PRELOAD", preload);  // (--no-preload)
        env.emplace_back("DEPUTY_AGENT", agent);
    }
    // No job secret: the library's rank 0 draws one and broadcasts it over
    // MPI_COMM_WORLD (mpi.md), so that it is never in a rank's environment,
    // which any process of the user can read.
    if (!token.empty()) env.emplace_back("DEPUTY_TOKEN", token);
    std::vector<std::pair<std::string, std::string>> passed;
    for (char **e = environ; *e; ++e) {
        const std::string entry(*e);
        if (entry.rfind("DEPUTY_MPI_", 0) != 0) continue;
        const size_t eq = entry.find('=');
        if (eq == std::string::npos) continue;
        if (p.p2p && entry.substr(0, eq) == "DEPUTY_MPI_P2P") continue;  // --p2p says
        passed.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    }
    if (p.p2p) passed.emplace_back("DEPUTY_MPI_P2P", "1");
    std::sort(passed.begin(), passed.end());
    env.insert(env.end(), passed.begin(), passed.end());
    return env;
}

// `mpirun <rank environment> <the user's arguments>`; with --nodes every
// program behind the rank shim.
PlannedCommand program_command(const Plan &p, const std::vector<std::string> &args,
                               const std::string &agent, const std::string &token) {
    const MpiFlavor flavor = p.launcher.flavor;
    const std::vector<std::pair<std::string, std::string>> env = rank_env(p, agent, token);
    PlannedCommand c;
    c.argv.push_back(p.launcher.path);
    for (const auto &[name, value] : env) {
        std::vector<std::string> o = launch::rank_env_option(flavor, name, value);
        c.argv.insert(c.argv.end(), o.begin(), o.end());
    }
    c.argv.insert(c.argv.end(), p.binding.begin(), p.binding.end());
    c.argv.insert(c.argv.end(), p.sharing.begin(), p.sharing.end());
    const std::vector<size_t> &programs = p.command_line.programs;
    for (size_t i = 0; i < args.size(); ++i) {
        if ((p.mode == AgentsMode::kNodes || p.mode == AgentsMode::kDpus) &&
            std::find(programs.begin(), programs.end(), i) != programs.end())
            c.argv.insert(c.argv.end(), {p.deputy, "mpirun", "--rank-shim"});
        c.argv.push_back(args[i]);
    }
    return c;
}

std::string with_env(const PlannedCommand &c) {
    const std::vector<std::string> verbatim{kDirPlaceholder, kTokenPlaceholder};
    std::string line;
    for (const std::string &e : c.env) line += launch::command_line({e}, verbatim) + " ";
    return line + launch::command_line(c.argv, verbatim);
}

// The plan as text: for --dry-run (with placeholders) and -v.
void describe(FILE *out, const char *prefix, const Plan &p, const PlannedCommand &agents,
              const PlannedCommand &program, const std::string &dir) {
    std::fprintf(out, "%sMPI: %s (%s); preloaded library: %s\n", prefix, p.launcher.version.c_str(),
                 p.launcher.path.c_str(),
                 p.library.empty() ? "none (--baseline, --no-preload)" : p.library.c_str());
    if (p.baseline) {
        if (p.placement.requested)
            std::fprintf(out, "%s%s; --baseline: no agent, the ranks bound alike\n", prefix,
                         launch::describe_job_placement(p.placement, p.command_line.ranks).c_str());
        std::fprintf(out, "%sprogram: %s\n", prefix, with_env(program).c_str());
        return;
    }
    switch (p.mode) {
        case AgentsMode::kPrivate:
            std::fprintf(out, "%sagents: one private agent on this machine\n", prefix);
            break;
        case AgentsMode::kNodes:
            std::fprintf(out,
                         "%sagents: %d simulated nodes on this machine (%s); rank r of S "
                         "attaches to node r*%d/S through the rank shim\n",
                         prefix, p.mpi_agents.nodes, p.mpi_agents.launcher.version.c_str(),
                         p.mpi_agents.nodes);
            break;
        case AgentsMode::kHosts:
            std::fprintf(out, "%sagents: one per host of %s (%s)\n", prefix,
                         launch::command_line(p.command_line.hosts_as_given).c_str(),
                         p.mpi_agents.launcher.version.c_str());
            break;
        case AgentsMode::kDpus: {
            std::string pairs;
            for (size_t i = 0; i < p.host_names.size(); ++i)
                pairs += (i ? ", " : "") + p.host_names[i] + " -> " + p.dpu_names[i];
            std::fprintf(out,
                         "%sagents: one per DPU of %s (%s), listening on %s in the secure "
                         "session (key %s); memory %s; host -> DPU: %s\n",
                         prefix, p.mpi_agents.dpu_hostfile.c_str(),
                         p.mpi_agents.launcher.version.c_str(), p.mpi_agents.listen.c_str(),
                         p.key_file.c_str(), p.memory.empty() ? "staged" : p.memory.c_str(),
                         pairs.c_str());
            break;
        }
    }
    if (p.placement.requested)
        std::fprintf(out, "%s%s%s\n", prefix,
                     launch::describe_job_placement(p.placement, p.command_line.ranks).c_str(),
                     p.mode == AgentsMode::kDpus
                         ? "; for the agents on their DPUs (the ranks are not bound)"
                     : p.mode == AgentsMode::kHosts && p.placement.binds_ranks()
                         ? "; computed from this machine, the hosts are taken to be alike"
                         : "");
    std::fprintf(out, "%sagents:  %s\n", prefix, with_env(agents).c_str());
    if (p.mode == AgentsMode::kHosts || p.mode == AgentsMode::kDpus) {
        std::fprintf(
            out, "%sready:   %s\n", prefix,
            launch::command_line(launch::mpi_agents_probe(p.mpi_agents, dir), {kDirPlaceholder})
                .c_str());
        std::fprintf(
            out, "%scleanup: %s\n", prefix,
            launch::command_line(launch::mpi_agents_cleanup(p.mpi_agents, dir), {kDirPlaceholder})
                .c_str());
    }
    std::fprintf(out, "%sprogram: %s\n", prefix, with_env(program).c_str());
}

PlannedCommand agents_command(const Plan &p, const std::string &dir, const std::string &token) {
    if (p.mode != AgentsMode::kPrivate) return launch::mpi_agents_command(p.mpi_agents, dir, token);
    PlannedCommand c;
    c.argv = launch::private_agent_argv(dir, p.private_agent);
    c.argv[0] = p.deputy;
    return c;
}

std::string agents_address(const Plan &p, const std::string &dir) {
    return p.mode == AgentsMode::kPrivate ? dir + "/agent.sock"
                                          : launch::mpi_agents_address(p.mpi_agents, dir);
}

void dry_run(const Plan &p, const std::vector<std::string> &args) {
    const std::string dir = kDirPlaceholder;
    std::printf(
        "%s --dry-run: nothing is started. %s stands for a fresh private directory "
        "($TMPDIR/deputy-mpirun-XXXXXX, mode 0700) and %s for the agents' fresh token (64 hex "
        "digits).\n",
        kTool, kDirPlaceholder, kTokenPlaceholder);
    describe(
        stdout, "", p, agents_command(p, dir, kTokenPlaceholder),
        program_command(p, args, agents_address(p, dir), kTokenPlaceholder),
        dir);
}

// Once, before anything runs: ranks and engines on the same CPUs, and
// Hydra ranks the binding list cannot reach.
void warn_about_placement(const Plan &p) {
    // The agents have CPUs of their own, or there are none.
    if (p.mode == AgentsMode::kDpus || p.baseline) return;
    const int ranks = p.mode == AgentsMode::kHosts ? 0 : p.command_line.ranks;
    const std::string overlap =
        launch::overlap_warning(p.placement, ranks, p.placement.engine_cpus(), "");
    if (!overlap.empty()) std::fprintf(stderr, "%s: warning: %s\n", kTool, overlap.c_str());
    // Measured (docs/PERFORMANCE.md, "Point-to-point on shared cores"): with
    // every core computing, a message the receiver cannot copy itself needs
    // the agent's thread, which gets a CPU only when a rank waits. Receivers
    // copy on one node, in communicators of at most 16 ranks (client/p2p.h).
    if (p.p2p && !overlap.empty() &&
        (p.mode != AgentsMode::kPrivate || p.command_line.ranks <= 0 ||
         p.command_line.ranks > int(channel::kMaxCardMembers)))
        std::fprintf(stderr,
                     "%s: warning: --p2p with the agent on the ranks' CPUs: receivers copy "
                     "messages themselves only on one node, in communicators of at most %u "
                     "ranks; other messages take up to 3.7x MPI's time while the ranks "
                     "compute; docs/p2p.md, \"Where it pays\"\n",
                     kTool, channel::kMaxCardMembers);
    if (!p.binding.empty() && p.launcher.flavor == MpiFlavor::kHydra &&
        (p.mode == AgentsMode::kHosts || p.command_line.ranks == 0))
        std::fprintf(stderr,
                     "%s: warning: Hydra binds only the first %zu rank(s) of each host to "
                     "--agent-cores %s (one per entry of -bind-to user:, which does not wrap "
                     "around); %s\n",
                     kTool, p.placement.placement.rank_slots.size(),
                     p.placement.placement.request.text.c_str(),
                     p.mode == AgentsMode::kHosts ? "with more, the others run unbound"
                                                  : "give -n so that every rank is bound");
}

// Whatever mpirun left behind was adopted by this process (it is a child
// subreaper): kill and reap it, so that nothing of the job outlives it.
void reap_orphans() {
    int n = 0;
    for (pid_t child : launch::children_of(getpid())) {
        std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
        std::string line;
        std::getline(stat, line);
        const size_t paren = line.rfind(')');
        const char state =
            paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
        DP_APP_DEBUG("{}: adopted pid {} in state {}: {}", kTool, child, state, line);
        if (state != 'Z') {
            launch::kill_tree(child, SIGKILL);
            ++n;
        }
        while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
    if (n > 0)
        std::fprintf(stderr, "%s: killed %d process%s that mpirun left behind\n", kTool, n,
                     n == 1 ? "" : "es");
}

int run(const MpirunFlags &f, const std::vector<std::string> &args) {
    Plan plan;
    std::string error;
    int code = 1;
    if (!make_plan(f, args, &plan, &error, &code)) {
        std::fprintf(stderr, "%s: %s\n", kTool, error.c_str());
        return code;
    }
    warn_about_placement(plan);
    if (f.dry_run) {
        dry_run(plan, args);
        return 0;
    }
    // Ranks whose mpirun died become this process's children instead of
    // init's, so that reap_orphans() finds them.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    launch::SignalFd signals;
    if (!signals.ok()) {
        std::fprintf(stderr, "%s: signalfd: %s\n", kTool, std::strerror(errno));
        return 1;
    }
    launch::JobAgent private_agent;
    launch::MpiAgents mpi_agents;
    int sig = 0;
    auto outcome = launch::AgentProcess::Outcome::kFailed;
    if (plan.baseline) {
        outcome = launch::AgentProcess::Outcome::kReady;
    } else if (plan.mode == AgentsMode::kPrivate) {
        switch (private_agent.acquire(plan.private_agent, signals, &error, &sig)) {
            case launch::JobAgent::Outcome::kReady:
                outcome = launch::AgentProcess::Outcome::kReady;
                break;
            case launch::JobAgent::Outcome::kInterrupted:
                outcome = launch::AgentProcess::Outcome::kInterrupted;
                break;
            default:
                outcome = launch::AgentProcess::Outcome::kFailed;
        }
    } else {
        outcome = mpi_agents.start(plan.mpi_agents, signals, &error, &sig);
    }
    if (outcome == launch::AgentProcess::Outcome::kInterrupted) {
        std::fprintf(stderr, "%s: got %s while starting the agents; nothing was run\n", kTool,
                     launch::signal_name(sig).c_str());
        reap_orphans();
        return 128 + sig;
    }
    if (outcome == launch::AgentProcess::Outcome::kFailed) {
        std::fprintf(stderr, "%s: %s\n", kTool, error.c_str());
        reap_orphans();
        return 1;
    }
    const bool private_mode = plan.mode == AgentsMode::kPrivate;
    const std::string address = plan.baseline ? ""
                                : private_mode ? private_agent.address()
                                               : mpi_agents.address();
    const std::string token = plan.baseline ? ""
                              : private_mode ? private_agent.token()
                                             : mpi_agents.token();
    const PlannedCommand program = program_command(plan, args, address, token);
    if (f.verbose) {
        // The token stays out of logs.
        PlannedCommand shown =
            program_command(plan, args, address, token.empty() ? "" : kTokenPlaceholder);
        const std::string dir = address.substr(0, address.rfind('/'));
        describe(stderr, "deputy mpirun: ", plan, agents_command(plan, dir, kTokenPlaceholder),
                 shown, dir);
    }
    launch::JobSpec job;
    job.size = 1;
    job.program = program.argv[0];
    job.command = program.argv;
    job.env = program.env;
    job.output = launch::OutputMode::kPlain;
    job.grace_s = f.grace_s;
    job.tool = kTool;
    job.name = "mpirun";
    job.rank_env = false;
    // mpirun ends its ranks on SIGTERM; SIGKILL would leave them running.
    job.parent_death_signal = SIGTERM;
    const int rc = launch::run_job(job, signals, [&] {
        if (plan.baseline)
            return;
        else if (private_mode)
            private_agent.check();
        else
            mpi_agents.check();
    });
    private_agent.stop();
    mpi_agents.stop();
    reap_orphans();
    DP_APP_DEBUG("{}: mpirun's exit code {}", kTool, rc);
    return rc;
}

}  // namespace

int split_mpirun_arguments(int argc, char **argv) {
    if (argc < 3 || std::strcmp(argv[1], "mpirun") != 0) return argc;
    for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") != 0) continue;
        // Is everything between "mpirun" and this "--" deputy's own? Then
        // it is the separator; otherwise it belongs to mpirun or the program.
        CLI::App trial;
        MpirunFlags flags;
        add_options(&trial, &flags);
        trial.prefix_command();
        std::vector<std::string> before(argv + 2, argv + i);
        std::reverse(before.begin(), before.end());
        try {
            trial.parse(before);
        } catch (const CLI::Error &) {
            return argc;  // the real parse says what is wrong
        }
        if (!trial.remaining().empty()) return argc;
        g_after_separator.assign(argv + i + 1, argv + argc);
        return i;
    }
    return argc;
}

void register_mpirun(CLI::App &app) {
    auto f = std::make_shared<MpirunFlags>();
    CLI::App *cmd = app.add_subcommand(
        "mpirun",
        "run an unmodified MPI program under mpirun with deputy: starts the agents, preloads "
        "the PMPI library into every rank, cleans up");
    cmd->footer(R"(Usage: deputy mpirun [deputy options] [--] [mpirun arguments] program [args]

deputy's options come first; the first argument that is not one of them (or
everything after a `--`) is mpirun's, up to and including the program.

1. mpirun (--mpirun, default `mpirun` in PATH) is Open MPI's or MPICH's Hydra,
   by its --version; the ranks preload libdeputy-mpi-openmpi.so or
   libdeputy-mpi-mpich.so (beside the build tree: ../src/mpi/ from this
   binary; installed: the libdir), or --mpi-lib PATH.
2. The agents:
   - one machine (no --hostfile/-hostfile/--host/-H/-machinefile, Hydra -f/-hosts,
     in the mpirun arguments): a private `deputy agent` in a fresh 0700
     directory $TMPDIR/deputy-mpirun-XXXXXX;
   - --nodes K: K agents on this machine as one MPI job (simulated nodes,
     docs/nodes.md); rank r of S attaches to node r*K/S (block mapping:
     with 4 ranks on 2 nodes, ranks 0,1 -> node 0 and 2,3 -> node 1);
   - a hostfile or host list: one agent per host (mpirun --map-by ppr:1:node);
   - --dpu-hostfile FILE with a hostfile or host list: one agent per DPU of
     FILE (line i serves the i-th host), listening on tcp://0.0.0.0:--dpu-port
     with --key; each rank finds its host among the hosts (by name or
     address) and reaches that host's DPU in the secure session
     (--memory staged|rdma).
   It waits until every agent listens (--agent-timeout).
3. It runs `mpirun <rank environment> <mpirun arguments> program args`; every
   rank (not mpirun itself) gets LD_PRELOAD=<library>[:your LD_PRELOAD],
   DEPUTY_AGENT, DEPUTY_TOKEN and your DEPUTY_MPI_* (no job secret: the
   library's rank 0 draws one and broadcasts it)
   variables (Open MPI: -x NAME=value; Hydra: -genv NAME value).
   With --agent-cores (last, N, cpus:LIST, smt) the agents pin themselves to
   the reserved CPUs and the ranks are bound to the others with mpirun's own
   options (Open MPI: --cpu-set <logical cores> --bind-to core; Hydra:
   -bind-to user:<cpus>); without it, a warning says the ranks and the
   engines share CPUs and which layout would avoid it.
4. SIGINT, SIGTERM and SIGHUP go to mpirun; the exit code is mpirun's (at
   least 128+signal after one). The agents, their sockets and directories are
   removed in every case.

Examples:
  deputy mpirun -np 4 ./app                        # Open MPI, one private agent
  deputy mpirun --nodes 2 -- --oversubscribe -np 4 ./app
  deputy mpirun --mpirun mpirun.mpich -np 2 ./app  # MPICH
  deputy mpirun --dry-run -np 4 ./app              # show the commands only
  deputy mpirun --agent-cores last -np 6 ./app     # the agent on the last core of each socket
  DEPUTY_MPI_REPORT=1 deputy mpirun -np 2 ./app    # DEPUTY_MPI_* reach the ranks
  deputy mpirun --p2p -np 2 ./app                  # point-to-point through deputy too
  deputy mpirun --dpu-hostfile dpus --key k --memory rdma -- --hostfile hosts -np 8 ./app
  deputy mpirun --operations                       # what the library offloads, and from which size
See docs/launch.md.)");
    add_options(cmd, f.get());
    // The first argument that is not deputy's starts mpirun's.
    cmd->prefix_command();
    cmd->callback([f, cmd] {
        cli::LogFlags log;
        log.log_level = f->verbose ? "60" : "50";
        cli::apply_log_flags(log);
        // "No agent at the default address" is not news here.
        log::set_sdk_level(*log::parse_level("20"));
        std::vector<std::string> args = cmd->remaining();
        args.insert(args.end(), g_after_separator.begin(), g_after_separator.end());
        int rc;
        if (f->operations) {
            print_mpi_operations(stdout);
            rc = 0;
        } else if (f->rank_shim) {
            rc = launch::run_rank_shim(args);
        } else if (!f->await_agent.empty()) {
            rc = launch::await_agent(f->await_agent, f->agent_timeout_s);
        } else if (!f->remove_agent_dir.empty()) {
            rc = launch::remove_agent_dir(f->remove_agent_dir);
        } else {
            if (args.empty())
                throw CLI::ValidationError(
                    "no program: deputy mpirun [deputy options] [--] [mpirun arguments] program "
                    "[args]");
            rc = run(*f, args);
        }
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace deputy::tools
