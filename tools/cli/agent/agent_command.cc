#include "cli/agent/agent_command.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <fstream>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "bench/channel/agent_peer.h"
#include "channel/agent_address.h"
#include "common/cli_common.h"
#include "common/cli_json.h"
#include "common/log.h"
#include "proxy/team_proxy.h"

namespace deputy::tools {
namespace {

struct AgentFlags {
    std::string socket;
    std::string config_file;
    uint32_t engines = 0;  // 0: config or 1
    std::string cpus;
    std::string agent_cores;
    std::string token_file;
    std::string listen;
    std::string key_file;
    bool insecure_tcp = false;
    std::string pool_size;
    uint32_t max_clients = 0;
    uint32_t exit_when_unused_ms = 0;
    bool daemon = false;
    bool dumpable = false;
    std::string pidfile;
    std::string log_file;
    std::string inter;
    cli::LogFlags log;
};

std::atomic<agent::Agent *> g_agent{nullptr};
// A stop asked before the agent existed (its socket may be seen, and a
// launcher's SIGUSR1 come, before serve() sets g_agent).
volatile sig_atomic_t g_stop_asked = 0;
InternodeFactory g_internode_factory;

// Started by an MPI launcher: the agents of the nodes form one MPI job.
bool under_mpi_launcher() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
           std::getenv("PMIX_RANK");
}

// Runs deputy-agent-mpi (beside this binary; the `deputy` command itself
// does not link MPI) with this command's arguments after "agent".
[[noreturn]] void exec_mpi_agent() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> args;
    for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
    auto at = std::find(args.begin(), args.end(), "agent");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string("./deputy");
    const std::string program = dir.substr(0, dir.rfind('/')) + "/deputy-agent-mpi";
    std::vector<char *> argv{const_cast<char *>(program.c_str())};
    if (at != args.end())
        for (auto it = std::next(at); it != args.end(); ++it) argv.push_back(it->data());
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    DP_APP_ERROR("deputy agent under mpirun: cannot run {}: {} (it is built when CMake finds "
                 "MPI; Debian: openmpi-bin libopenmpi-dev)",
                 program, std::strerror(errno));
    throw CLI::RuntimeError(2);
}

void on_signal(int) {
    g_stop_asked = 1;
    if (agent::Agent *a = g_agent.load()) a->stop();
}

// Everything the agent needs before it may fork: flags over config over env.
bool build_config(const AgentFlags &f, agent::AgentConfig *config, std::string *error) {
    if (!f.config_file.empty() && agent::load_config_file(f.config_file, config, error) != DP_OK)
        return false;
    config->socket_path = channel::resolve_agent_address(
        !f.socket.empty() ? f.socket : config->socket_path);
    if (!f.token_file.empty()) {
        std::ifstream in(f.token_file);
        if (!in || !std::getline(in, config->token) || config->token.empty()) {
            *error = "--token-file " + f.token_file + ": cannot read a token from it";
            return false;
        }
    } else if (config->token.empty()) {
        if (const char *env = std::getenv("DEPUTY_TOKEN")) config->token = env;
    }
    if (!f.listen.empty()) config->listen = f.listen;
    if (!f.key_file.empty()) config->key_file = f.key_file;
    if (f.insecure_tcp) config->insecure_tcp = true;
    if (f.engines) {
        if (config->device_given) {
            *error = "--engines: the --config file defines the device; set engines there";
            return false;
        }
        config->engines = f.engines;
        config->engines_set = true;
    }
    // Either flag replaces whatever the file said about the engines' CPUs.
    if (!f.cpus.empty() && !f.agent_cores.empty()) {
        *error = "--agent-cores and --cpus both say where the engines run; give one";
        return false;
    }
    if (!f.cpus.empty()) {
        config->cpus = f.cpus;
        config->agent_cores.clear();
    }
    if (!f.agent_cores.empty()) {
        config->agent_cores = f.agent_cores;
        config->agent_cores_flag = "--agent-cores";
        config->cpus.clear();
    }
    if (!f.pool_size.empty()) config->pool_bytes = cli::parse_size("--pool-size", f.pool_size);
    if (f.max_clients) config->max_clients = f.max_clients;
    if (f.exit_when_unused_ms) config->exit_when_unused_ms = f.exit_when_unused_ms;
    if (f.dumpable) config->dumpable = true;
    if (!f.inter.empty()) {
        if (!agent::valid_inter_algorithm(f.inter)) {
            *error = "--inter " + f.inter + ": not one of " + agent::kInterAlgorithms;
            return false;
        }
        config->inter_algorithm = f.inter;
    }
    return agent::finalize_config(config, error) == DP_OK;
}

std::string default_pidfile(const std::string &socket) {
    if (!socket.empty() && socket[0] == '@') return "/tmp/deputy-agent-" + socket.substr(1) + ".pid";
    return socket.substr(0, socket.rfind('/')) + "/agent.pid";
}

// The agent's staging buffers (a message copied aside, bytes between
// nodes, a collective's inter-node step) are megabytes each, made and freed
// per message. glibc gives such blocks fresh mmap()ed pages, each faulted
// in (and zeroed by the kernel) on first touch: between two simulated nodes
// that capped osu_bw at 1.8 GB/s, against 4.7-7.7 GB/s with freed memory
// kept for reuse. So blocks up to 64 MiB come from the heap, and freed
// memory stays mapped up to the stage bound (p2p_node_stage_bytes, at
// least 256 MiB) (docs/PERFORMANCE.md, "Point-to-point between simulated
// nodes").
void keep_staging_memory(const agent::AgentConfig &config) {
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD,
            int(std::min<uint64_t>(std::max<uint64_t>(config.p2p_node_stage_bytes, 256u << 20),
                                   INT_MAX)));
}

int serve(agent::AgentConfig config, const std::string &pidfile, int ready_fd,
          agent::Internode *internode = nullptr) {
    keep_staging_memory(config);
    // What the team proxies need, read before the agent takes the config.
    const std::string token = config.token;
    const uint32_t max_proxies = config.max_remote_clients;
    std::unique_ptr<agent::Agent> agent;
    std::string error;
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    // MPI launchers pass SIGUSR1 on to their job, not SIGTERM: how `deputy
    // mpirun` stops an MPI job of agents (docs/agent.md).
    sigaction(SIGUSR1, &sa, nullptr);
    dp_status_t s = agent::Agent::create(std::move(config), &agent, &error, internode);
    if (s != DP_OK) {
        DP_APP_ERROR("deputy agent: {} ({})", error, dp_status_name(s));
        if (ready_fd >= 0) {
            std::string msg = "1" + error;
            [[maybe_unused]] ssize_t n = ::write(ready_fd, msg.data(), msg.size());
            close(ready_fd);
        }
        return 1;
    }
    if (!pidfile.empty()) {
        std::ofstream out(pidfile, std::ios::trunc);
        out << getpid() << "\n";
        if (!out) DP_APP_WARN("deputy agent: cannot write pidfile {}", pidfile);
    }
    // Services the agent hands connections to; each runs on its own thread,
    // joined when the agent stops.
    std::mutex service_mutex;
    std::vector<std::thread> service_threads;
    const std::string address = agent->address();
    agent->set_service_handler([&](UniqueFd socket, const channel::sock::PeerCredentials &) {
        std::lock_guard<std::mutex> lock(service_mutex);
        service_threads.emplace_back([address, fd = std::move(socket)]() mutable {
            bench::channel::serve_agent_peer(std::move(fd), address);
        });
    });
    // Team proxies (proxy/team_proxy.h), one thread each, at most
    // max_remote_clients at once; finished ones are joined as new ones come.
    struct ProxyThread {
        std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
        std::thread thread;
    };
    std::list<ProxyThread> proxies;
    std::atomic<bool> stopping{false};
    agent->set_proxy_handler([&](UniqueFd socket, const std::string &peer) {
        std::lock_guard<std::mutex> lock(service_mutex);
        for (auto it = proxies.begin(); it != proxies.end();) {
            if (!it->done->load()) {
                ++it;
                continue;
            }
            it->thread.join();
            it = proxies.erase(it);
        }
        if (proxies.size() >= max_proxies) {
            DP_LOG_WARN("agent: team proxy for {} refused: {} running (max_remote_clients)",
                        peer, proxies.size());
            return;  // its socket closes: the member's dp_team_create fails
        }
        ProxyThread &p = proxies.emplace_back();
        p.thread = std::thread([&stopping, done = p.done, fd = std::move(socket),
                                o = proxy::ProxyOptions{address, token, peer}]() mutable {
            proxy::serve_team_proxy(std::move(fd), o, stopping);
            done->store(true);
        });
    });
    g_agent = agent.get();
    if (g_stop_asked) agent->stop();
    signal(SIGPIPE, SIG_IGN);
    if (ready_fd >= 0) {
        [[maybe_unused]] ssize_t n = ::write(ready_fd, "0", 1);
        close(ready_fd);
    }
    s = agent->run();
    g_agent = nullptr;
    stopping = true;
    for (std::thread &t : service_threads) t.join();
    for (ProxyThread &p : proxies) p.thread.join();
    agent.reset();
    if (!pidfile.empty()) unlink(pidfile.c_str());
    return s == DP_OK ? 0 : 1;
}

int run_daemon(agent::AgentConfig config, const std::string &pidfile, const std::string &log_file) {
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        DP_APP_ERROR("deputy agent --daemon: pipe: {}", std::strerror(errno));
        return 1;
    }
    const std::string socket = config.socket_path;
    pid_t pid = fork();
    if (pid < 0) {
        DP_APP_ERROR("deputy agent --daemon: fork: {}", std::strerror(errno));
        return 1;
    }
    if (pid == 0) {
        close(pipefd[0]);
        // A process group of its own (a terminal's signals to the caller's
        // job miss it), but not a session of its own: under the kernel's
        // autogroup scheduling (CONFIG_SCHED_AUTOGROUP, on by default in
        // most distributions) every session is a scheduling group, and an
        // agent alone in one is given as much CPU as all the ranks of the
        // caller's session together whenever no core is spare: it preempts
        // computing ranks far more than their own threads would (the
        // shared placement with every core computing: docs/PERFORMANCE.md,
        // "The agent's scheduling group"). SIGHUP is ignored instead.
        setpgid(0, 0);
        signal(SIGHUP, SIG_IGN);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int out = log_file.empty() ? null
                                   : open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (out < 0) out = null;
        dup2(null, STDIN_FILENO);
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
        _exit(serve(std::move(config), pidfile, pipefd[1]));
    }
    close(pipefd[1]);
    // Return only once the child listens (or failed), so scripts can use
    // the agent as soon as this command ends.
    char buf[1024];
    ssize_t n = read(pipefd[0], buf, sizeof(buf));
    close(pipefd[0]);
    if (n >= 1 && buf[0] == '0') {
        std::printf("deputy agent: pid %d listening on %s (pidfile %s)\n", int(pid), socket.c_str(),
                    pidfile.c_str());
        return 0;
    }
    std::string why = n > 1 ? std::string(buf + 1, size_t(n - 1)) : "it exited before listening";
    DP_APP_ERROR("deputy agent --daemon: the agent did not start: {}", why);
    return 1;
}

}  // namespace

void set_internode_factory(InternodeFactory factory) { g_internode_factory = std::move(factory); }

void register_agent(CLI::App &app) {
    auto f = std::make_shared<AgentFlags>();
    CLI::App *cmd = app.add_subcommand(
        "agent", "run the node's agent: hosts the mover for local processes (dp_init)");
    cmd->add_option("--socket", f->socket,
                    "Unix socket path (default: $DEPUTY_AGENT, else "
                    "$XDG_RUNTIME_DIR/deputy/agent.sock or /tmp/deputy-$UID/agent.sock)");
    cmd->add_option("--config", f->config_file,
                    "JSON: {\"agent\": {...}, \"device\": accel-config} (docs/agent.md)");
    cmd->add_option("--engines", f->engines, "engine threads (without a device in --config)")
        ->check(CLI::Range(1, DP_MOVER_MAX_ENGINES));
    cmd->add_option("--cpus", f->cpus, "pin engines on these CPUs (\"0-1\", \"2,3\")");
    cmd->add_option("--agent-cores", f->agent_cores,
                    "where the agent runs: last (the last core of each socket), N (cores), "
                    "cpus:LIST, smt (the SMT siblings of the ranks' cores) or shared (default: "
                    "nothing pinned); docs/agent.md");
    cmd->add_option("--token-file", f->token_file,
                    "clients must present this file's first line (DEPUTY_TOKEN) to attach");
    cmd->add_option("--listen", f->listen,
                    "also serve remote clients (DEPUTY_AGENT=tcp://HOST:PORT) at "
                    "tcp://ADDR:PORT, through the secure session (--key); port 0 picks one "
                    "(`deputy info` shows it)");
    cmd->add_option("--key", f->key_file,
                    "--listen: the secure session's key file (`deputy bench channel --keygen "
                    "FILE` makes one; both ends need it)");
    cmd->add_flag("--insecure-tcp", f->insecure_tcp,
                  "--listen without the secure session: anyone who reaches the port can use the "
                  "agent and read what it moves");
    cmd->add_option("--pool-size", f->pool_size, "mapped pool per client (default 64m)")
        ->check(cli::size_validator());
    cmd->add_option("--max-clients", f->max_clients, "clients attached at once (default 256)");
    cmd->add_option("--exit-when-unused", f->exit_when_unused_ms,
                    "stop once no client has been attached for this many ms (an agent started "
                    "on demand; default: run until stopped)");
    cmd->add_option("--inter", f->inter,
                    std::string("several nodes (under mpirun): allreduce among the agents: ") +
                        agent::kInterAlgorithms + " (default auto: by size)");
    cmd->add_flag("--daemon", f->daemon,
                  "detach; return once the agent listens; write its pid to --pidfile");
    cmd->add_flag("--dumpable", f->dumpable,
                  "stay dumpable (a debugger, a core dump): any process of this user can then "
                  "open the clients' segments through the agent's /proc/<pid>/fd");
    cmd->add_option("--pidfile", f->pidfile, "pid file (default with --daemon: next to the socket)");
    cmd->add_option("--log-file", f->log_file, "--daemon: append the agent's log here");
    cli::add_log_flags(*cmd, &f->log);
    cli::add_json_config(*cmd);
    CLI::App *cmd_ptr = cmd;
    cmd->callback([f, cmd_ptr] {
        cli::LogFlags levels = f->log;
        // The agent's work is the library's (src/agent): -l sets both loggers
        // unless --sdk-log-level says otherwise.
        if (levels.sdk_log_level.empty()) levels.sdk_log_level = levels.log_level;
        cli::apply_log_flags(levels);
        agent::AgentConfig config;
        std::string error;
        if (!build_config(*f, &config, &error)) throw CLI::ValidationError(error);
        // The config file's level applies unless -l was given on the command line.
        if (!config.log_level.empty() && cmd_ptr->count("--log-level") == 0) {
            levels.log_level = config.log_level;
            if (f->log.sdk_log_level.empty()) levels.sdk_log_level = config.log_level;
            cli::apply_log_flags(levels);
        }
        std::string pidfile = f->pidfile;
        if (!g_internode_factory && under_mpi_launcher()) exec_mpi_agent();
        if (g_internode_factory) {
            if (f->daemon)
                throw CLI::ValidationError("--daemon", "under mpirun the agents stay in the "
                                                       "foreground: mpirun is their parent");
            std::unique_ptr<agent::Internode> internode = g_internode_factory(&config, &error);
            if (!internode) {
                DP_APP_ERROR("deputy agent: cannot join the other nodes' agents: {}", error);
                throw CLI::RuntimeError(1);
            }
            DP_APP_INFO("deputy agent: {}; clients connect to {}", internode->describe(),
                        config.socket_path);
            int rc = serve(std::move(config), pidfile, -1, internode.get());
            if (rc != 0) throw CLI::RuntimeError(rc);
            return;
        }
        if (f->daemon && pidfile.empty()) pidfile = default_pidfile(config.socket_path);
        int rc = f->daemon ? run_daemon(std::move(config), pidfile, f->log_file)
                           : serve(std::move(config), pidfile, -1);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace deputy::tools
