#include "cli/launch/mpi_agents.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "cli/launch/private_dir.h"
#include "cli/launch/secrets.h"
#include "cli/launch/spawn.h"

namespace deputy::launch {
namespace {

// `<agent mpirun> <placement>`: K processes here, or one per host.
std::vector<std::string> placed(const MpiAgentsSpec &spec) {
    std::vector<std::string> argv{spec.launcher.path};
    if (spec.nodes > 0) {
        // Open MPI refuses more processes than cores without it; Hydra
        // places any number and has no such option.
        if (spec.launcher.flavor == MpiFlavor::kOpenMpi) argv.push_back("--oversubscribe");
        argv.insert(argv.end(), {"-np", std::to_string(spec.nodes)});
    } else {
        argv.insert(argv.end(), {"--map-by", "ppr:1:node"});
        if (!spec.dpu_hostfile.empty())
            argv.insert(argv.end(), {"--hostfile", spec.dpu_hostfile});
        else
            argv.insert(argv.end(), spec.hosts.begin(), spec.hosts.end());
    }
    return argv;
}

std::string node_socket(const std::string &dir, int node) {
    return dir + "/agent-node" + std::to_string(node) + ".sock";
}

}  // namespace

std::string mpi_agents_address(const MpiAgentsSpec &spec, const std::string &dir) {
    if (spec.nodes > 0) return dir + "/agent-node{node}.sock";
    // DPUs: a shared file system (or DPUs that are namespaces of one
    // machine, as in the tests) would give every agent the same path.
    return spec.dpu_hostfile.empty() ? dir + "/agent.sock" : dir + "/agent-dpu{node}.sock";
}

PlannedCommand mpi_agents_command(const MpiAgentsSpec &spec, const std::string &dir,
                                  const std::string &token) {
    PlannedCommand c;
    c.argv = placed(spec);
    if (!spec.agent_cores.empty() && spec.launcher.flavor == MpiFlavor::kOpenMpi)
        c.argv.insert(c.argv.end(), {"--bind-to", "none"});
    if (spec.nodes == 0) {
        c.env.push_back("DEPUTY_TOKEN=" + token);
        c.argv.insert(c.argv.end(), {"-x", "DEPUTY_TOKEN"});
    }
    c.argv.insert(c.argv.end(), {spec.deputy, "agent", "--socket", mpi_agents_address(spec, dir)});
    if (spec.nodes > 0) c.argv.insert(c.argv.end(), {"--token-file", dir + "/token"});
    if (!spec.dpu_hostfile.empty())
        c.argv.insert(c.argv.end(), {"--listen", spec.listen, "--key", spec.key_file});
    if (!spec.config_file.empty()) c.argv.insert(c.argv.end(), {"--config", spec.config_file});
    if (!spec.agent_cores.empty()) c.argv.insert(c.argv.end(), {"--agent-cores", spec.agent_cores});
    return c;
}

std::vector<std::string> mpi_agents_probe(const MpiAgentsSpec &spec, const std::string &dir) {
    std::vector<std::string> argv = placed(spec);
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", spec.startup_timeout_s);
    argv.insert(argv.end(), {spec.deputy, "mpirun", "--await-agent", mpi_agents_address(spec, dir),
                             "--agent-timeout", timeout});
    return argv;
}

std::vector<std::string> mpi_agents_cleanup(const MpiAgentsSpec &spec, const std::string &dir) {
    std::vector<std::string> argv = placed(spec);
    argv.insert(argv.end(), {spec.deputy, "mpirun", "--remove-agent-dir", dir});
    return argv;
}

AgentProcess::Outcome MpiAgents::start(const MpiAgentsSpec &spec, SignalFd &signals,
                                       std::string *error, int *signal_out) {
    spec_ = spec;
    const std::string what =
        spec.nodes > 0 ? "the agents' mpirun (" + std::to_string(spec.nodes) + " nodes)"
        : spec.dpu_hostfile.empty() ? "the agents' mpirun (one agent per host)"
                                    : "the agents' mpirun (one agent per DPU)";
    // mpirun exits 1 when it ends its job on SIGTERM: the normal end here.
    agents_.configure(spec.tool, what, spec.grace_s, true);
    probe_.configure(spec.tool, "the probe of the hosts' agents", spec.grace_s, true);
    dir_ = make_private_dir("deputy-mpirun-", error);
    if (dir_.empty()) return AgentProcess::Outcome::kFailed;
    address_ = mpi_agents_address(spec, dir_);
    token_ = random_hex(32);
    const std::string token_file = dir_ + "/token";
    if (spec.nodes > 0 && !write_token_file(token_file, token_, error)) {
        stop();
        return AgentProcess::Outcome::kFailed;
    }
    if (token_.empty()) {
        *error = "the kernel gave no random bytes for the agents' token";
        stop();
        return AgentProcess::Outcome::kFailed;
    }
    const PlannedCommand c = mpi_agents_command(spec, dir_, token_);
    SpawnSpec s;
    s.path = c.argv[0];
    s.argv = c.argv;
    s.env = environment_with(c.env);
    const bool keep_log = !spec.log_file.empty();
    if (!agents_.start(s, keep_log ? spec.log_file : dir_ + "/agents.log", keep_log, error)) {
        stop();
        return AgentProcess::Outcome::kFailed;
    }
    launched_ = true;
    const auto outcome =
        agents_.wait_ready([this](std::string *why) { return ready(why); }, "every agent listened",
                           spec.startup_timeout_s, signals, error, signal_out);
    if (outcome != AgentProcess::Outcome::kReady) {
        stop();
        return outcome;
    }
    probe_.stop();
    listening_ = true;
    // They read it before they listened.
    if (spec.nodes > 0) unlink(token_file.c_str());
    DP_APP_DEBUG("{}: the agents listen on {}", spec.tool, address_);
    return outcome;
}

AgentProcess::Ready MpiAgents::ready(std::string *why) {
    if (spec_.nodes > 0) {
        int listening = 0;
        for (int n = 0; n < spec_.nodes; ++n) {
            struct stat st;
            if (stat(node_socket(dir_, n).c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ++listening;
        }
        *why =
            std::to_string(listening) + " of " + std::to_string(spec_.nodes) + " agents listened";
        return listening == spec_.nodes ? AgentProcess::Ready::kYes : AgentProcess::Ready::kNotYet;
    }
    if (!probe_started_) {
        probe_started_ = true;
        SpawnSpec s;
        s.argv = mpi_agents_probe(spec_, dir_);
        s.path = s.argv[0];
        // A TMPDIR of its own: Open MPI's mpirun creates its session
        // directory ($TMPDIR/ompi.HOST.UID) by checking, then mkdir, and the
        // agents' mpirun, started a moment before, may create it in between
        // ("mkdir ... File exists", orte_init failed: seen in a test run).
        const std::string tmp = dir_ + "/probe-tmp";
        if (mkdir(tmp.c_str(), 0700) != 0 && errno != EEXIST) {
            *why = "cannot create " + tmp + ": " + std::strerror(errno);
            return AgentProcess::Ready::kFailed;
        }
        s.env = environment_with({"TMPDIR=" + tmp});
        if (!probe_.start(s, dir_ + "/probe.log", false, why)) return AgentProcess::Ready::kFailed;
    }
    int status = 0;
    const char *where = spec_.dpu_hostfile.empty() ? "host" : "DPU";
    *why = std::string("waiting for the agent of every ") + where;
    if (!probe_.finished(&status)) return AgentProcess::Ready::kNotYet;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return AgentProcess::Ready::kYes;
    *why = std::string("the agent of some ") + where + " did not listen (" +
           describe_status(status) +
           "); the probe's log:\n" + probe_.log_text();
    return AgentProcess::Ready::kFailed;
}

void MpiAgents::cleanup_hosts() {
    AgentProcess cleanup;
    cleanup.configure(spec_.tool, "the removal of the hosts' agent directories", spec_.grace_s,
                      true);
    SpawnSpec s;
    s.argv = mpi_agents_cleanup(spec_, dir_);
    s.path = s.argv[0];
    s.env = environment_with({});
    std::string error;
    if (!cleanup.start(s, dir_ + "/cleanup.log", false, &error)) {
        std::fprintf(stderr, "%s: cannot remove the agents' directories on the hosts: %s\n",
                     spec_.tool.c_str(), error.c_str());
        return;
    }
    // Bounded like the agents' start: it is an mpirun job too.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(int64_t(spec_.startup_timeout_s * 1000));
    int status = 0;
    while (!cleanup.finished(&status)) {
        if (std::chrono::steady_clock::now() > deadline) {
            std::fprintf(stderr,
                         "%s: the removal of the agents' directories on the hosts (%s) "
                         "did not end within %g s\n",
                         spec_.tool.c_str(), dir_.c_str(), spec_.startup_timeout_s);
            return;  // stopped (and killed) by its destructor
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        std::fprintf(stderr,
                     "%s: removing the agents' directories on the hosts ended with %s; "
                     "its log:\n%s",
                     spec_.tool.c_str(), describe_status(status).c_str(),
                     cleanup.log_text().c_str());
}

void MpiAgents::stop() {
    probe_.stop();
    // The launcher passes SIGUSR1 on to every agent, which stops as on
    // SIGTERM: they leave MPI_Finalize together and mpirun exits 0. SIGTERM
    // to mpirun would cost two seconds (agent_process.h).
    agents_.stop(listening_ ? SIGUSR1 : SIGTERM);
    listening_ = false;
    if (dir_.empty()) return;
    // Agents on other hosts made their own directories.
    if (launched_ && spec_.nodes == 0) cleanup_hosts();
    launched_ = false;
    remove_private_dir(dir_, spec_.tool);
    dir_.clear();
}

}  // namespace deputy::launch
