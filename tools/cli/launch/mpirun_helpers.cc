#include "cli/launch/mpirun_helpers.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "cli/launch/host_list.h"

namespace deputy::launch {
namespace {

constexpr const char *kTool = "deputy mpirun";

// The integer in environment variable `name`, or false.
bool env_long(const char *name, long *out) {
    const char *v = std::getenv(name);
    if (!v || !*v) return false;
    const char *end = v + std::strlen(v);
    auto [p, ec] = std::from_chars(v, end, *out);
    return ec == std::errc() && p == end;
}

// --dpu-hostfile: this host's DPU, or empty with a message said.
std::string dpu_of_this_host(long rank) {
    const char *h = std::getenv(kShimHostsEnv), *d = std::getenv(kShimDpusEnv);
    const std::vector<std::string> hosts = comma_names(h ? h : "");
    const std::vector<std::string> dpus = comma_names(d ? d : "");
    if (hosts.empty() || hosts.size() != dpus.size()) {
        std::fprintf(stderr, "%s --rank-shim: rank %ld: %s and %s must list as many hosts as DPUs\n",
                     kTool, rank, kShimHostsEnv, kShimDpusEnv);
        return {};
    }
    std::string error;
    const int i = find_local_host(hosts, &error);
    if (i < 0) {
        std::fprintf(stderr,
                     "%s --rank-shim: rank %ld: %s: which DPU serves it is not known (--dpu-hostfile "
                     "pairs line i with the i-th host of the mpirun arguments)\n",
                     kTool, rank, error.c_str());
        return {};
    }
    return dpus[size_t(i)];
}

std::string hostname() {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

}  // namespace

int node_of_rank(long rank, long size, int nodes) {
    return int((static_cast<long long>(rank) * nodes) / size);
}

int run_rank_shim(const std::vector<std::string> &command) {
    long rank = -1, size = 0, nodes = 0;
    const bool open_mpi =
        env_long("OMPI_COMM_WORLD_RANK", &rank) && env_long("OMPI_COMM_WORLD_SIZE", &size);
    if (!open_mpi && !(env_long("PMI_RANK", &rank) && env_long("PMI_SIZE", &size))) {
        std::fprintf(stderr,
                     "%s --rank-shim: neither OMPI_COMM_WORLD_RANK/SIZE nor PMI_RANK/PMI_SIZE is "
                     "set: the shim runs under the mpirun that `deputy mpirun --nodes` or "
                     "`--dpu-hostfile` starts\n",
                     kTool);
        return 1;
    }
    const char *pattern = std::getenv(kShimAgentEnv);
    const bool dpus = std::getenv(kShimDpusEnv) != nullptr;
    if ((!dpus && (!env_long(kShimNodesEnv, &nodes) || nodes < 1)) || !pattern || rank < 0 ||
        rank >= size) {
        std::fprintf(stderr,
                     "%s --rank-shim: rank %ld of %ld with %s='%s' and %s='%s': needs 0 <= rank < "
                     "size, a node count >= 1 (or the DPUs) and an agent address\n",
                     kTool, rank, size, kShimNodesEnv,
                     std::getenv(kShimNodesEnv) ? std::getenv(kShimNodesEnv) : "", kShimAgentEnv,
                     pattern ? pattern : "");
        return 1;
    }
    if (command.empty()) {
        std::fprintf(stderr, "%s --rank-shim: no program to run\n", kTool);
        return 1;
    }
    std::string agent = pattern;
    const std::string placeholder = dpus ? "{dpu}" : "{node}";
    const std::string value =
        dpus ? dpu_of_this_host(rank) : std::to_string(node_of_rank(rank, size, int(nodes)));
    if (value.empty()) return 1;
    if (size_t at = agent.find(placeholder); at != std::string::npos)
        agent.replace(at, placeholder.size(), value);
    setenv("DEPUTY_AGENT", agent.c_str(), 1);
    if (const char *preload = std::getenv(kShimPreloadEnv); preload && *preload)
        setenv("LD_PRELOAD", preload, 1);
    for (const char *name : {kShimNodesEnv, kShimAgentEnv, kShimPreloadEnv, kShimHostsEnv,
                             kShimDpusEnv})
        unsetenv(name);
    std::vector<char *> argv;
    for (const std::string &a : command) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const int err = errno;
    std::fprintf(stderr, "%s --rank-shim: rank %ld: cannot execute '%s': %s\n", kTool, rank,
                 argv[0], std::strerror(err));
    return err == ENOENT ? 127 : 126;
}

int await_agent(const std::string &path, double timeout_s) {
    std::string socket = path;
    if (size_t at = socket.find("{node}"); at != std::string::npos) {
        long rank = -1;
        if (!env_long("OMPI_COMM_WORLD_RANK", &rank) && !env_long("PMI_RANK", &rank)) {
            std::fprintf(stderr, "%s --await-agent %s: no rank (OMPI_COMM_WORLD_RANK) for {node}\n",
                         kTool, path.c_str());
            return 1;
        }
        socket.replace(at, 6, std::to_string(rank));
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
    for (;;) {
        struct stat st;
        if (stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return 0;
        if (std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::fprintf(stderr, "%s: on host %s no agent listens on %s after %g s\n", kTool,
                 hostname().c_str(), socket.c_str(), timeout_s);
    return 1;
}

int remove_agent_dir(const std::string &dir) {
    // Only a directory that deputy mpirun made for its agents: private to
    // this user and named as make_private_dir names it.
    const std::string base = dir.substr(dir.rfind('/') + 1);
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0) return errno == ENOENT ? 0 : 1;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || base.rfind("deputy-mpirun-", 0) != 0) {
        std::fprintf(stderr,
                     "%s: on host %s %s is not an agent directory of deputy mpirun; "
                     "left alone\n",
                     kTool, hostname().c_str(), dir.c_str());
        return 1;
    }
    // The agent removed its socket when it stopped; one it left (killed)
    // goes here. Nothing else is removed.
    if (DIR *d = opendir(dir.c_str())) {
        while (dirent *e = readdir(d)) {
            const std::string path = dir + "/" + e->d_name;
            struct stat es;
            if (lstat(path.c_str(), &es) == 0 && S_ISSOCK(es.st_mode)) unlink(path.c_str());
        }
        closedir(d);
    }
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
        std::fprintf(stderr, "%s: on host %s cannot remove %s: %s\n", kTool, hostname().c_str(),
                     dir.c_str(), std::strerror(errno));
        return 1;
    }
    return 0;
}

}  // namespace deputy::launch
