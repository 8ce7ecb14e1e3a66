// Simulated nodes for tests: K agents as one MPI job on this machine
// (`mpirun -np K deputy agent`), each with its own socket, and a team whose
// members attach to the agents of their choice (nodes_test.cc,
// nodes_p2p_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "coll_test_util.h"

namespace deputy::testing {

inline std::string mpi_agent_bin() {
    std::string bin = DEPUTY_BIN;
    return bin.substr(0, bin.rfind('/')) + "/deputy-agent-mpi";
}

inline bool have_mpirun() { return system("command -v mpirun >/dev/null 2>&1") == 0; }

// Why simulated nodes cannot run here, "" when they can.
inline std::string why_no_nodes() {
    if (!have_mpirun()) return "mpirun not found (Debian: openmpi-bin)";
    struct stat st;
    if (stat(mpi_agent_bin().c_str(), &st) != 0)
        return mpi_agent_bin() + " not built (CMake did not find MPI)";
    if (under_emulator())
        return "the tests run under an emulator, and this host's mpirun cannot start the "
               "target's agents (run them on an arm64 host: docs/arm.md)";
    return "";
}

// K agents as one MPI job; agent k listens on dir/agent-node<k>.sock.
class NodeAgents {
  public:
    // `agent_keys`: more keys of the agents' config file ("key": value, ...).
    explicit NodeAgents(int k, std::vector<std::string> extra = {},
                        const std::string &agent_keys = "")
        : k_(k) {
        dir_ = make_private_dir();
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        // --enable-recovery: the job outlives an agent that dies, as the
        // agents' failure model needs (the others fail its teams and go on).
        {
            std::ofstream config(dir_ + "/agents.json");
            config << R"({"agent": {"node_timeout_ms": 2000)"
                   << (agent_keys.empty() ? "" : ", " + agent_keys) << "}}";
        }
        std::vector<std::string> args = {"mpirun", "--oversubscribe", "--enable-recovery", "-np",
                                         std::to_string(k), "--mca", "btl", "self,vader,tcp",
                                         DEPUTY_BIN, "agent", "--socket", dir_ + "/agent.sock",
                                         "--config", dir_ + "/agents.json", "-l", "40"};
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        if (posix_spawnp(&pid_, "mpirun", nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
        ready_ = pid_ > 0 && eventually(
                                 [&] {
                                     for (int i = 0; i < k_; ++i) {
                                         struct stat st;
                                         if (stat(socket(i).c_str(), &st) != 0) return false;
                                     }
                                     return true;
                                 },
                                 20000);
    }
    ~NodeAgents() { stop(); }
    void stop() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);  // mpirun forwards it to every agent
            int status;
            if (!eventually([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, 10000)) {
                kill(pid_, SIGKILL);
                waitpid(pid_, &status, 0);
            }
            pid_ = -1;
        }
        if (!dir_.empty()) {
            std::string cmd = "rm -rf '" + dir_ + "'";
            [[maybe_unused]] int rc = system(cmd.c_str());
            dir_.clear();
        }
    }
    bool ready() const { return ready_; }
    // The pid of node `node`'s agent (its OMPI_COMM_WORLD_RANK), -1 if none.
    pid_t agent_pid(int node) const {
        const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(node);
        DIR *d = opendir("/proc");
        pid_t found = -1;
        while (dirent *e = d ? readdir(d) : nullptr) {
            const pid_t pid = pid_t(atoi(e->d_name));
            if (pid <= 0) continue;
            std::ifstream cmd("/proc/" + std::string(e->d_name) + "/cmdline");
            std::string line;
            std::getline(cmd, line);
            if (line.find("deputy-agent-mpi") == std::string::npos ||
                line.find(dir_) == std::string::npos)
                continue;
            std::ifstream env("/proc/" + std::string(e->d_name) + "/environ");
            for (std::string var; std::getline(env, var, '\0');)
                if (var == want) found = pid;
        }
        if (d) closedir(d);
        return found;
    }
    std::string socket(int node) const {
        return dir_ + "/agent-node" + std::to_string(node) + ".sock";
    }

  private:
    int k_;
    std::string dir_;
    pid_t pid_ = -1;
    bool ready_ = false;
};

// A team whose rank r attaches to the agent of node_of(r).
class SpanningTeam {
  public:
    SpanningTeam(const NodeAgents &agents, std::vector<int> node_of, const std::string &key,
                 Memory memory = Memory::mapped, unsigned timeout_ms = 0,
                 uint64_t pool_bytes = 32 << 20)
        : node_of_(std::move(node_of)), memory_(memory), members_(node_of_.size()) {
        sockets_.resize(node_of_.size());
        for (size_t r = 0; r < node_of_.size(); ++r) {
            sockets_[r] = agents.socket(node_of_[r]);
            dp_config_t c = DP_CONFIG_INITIALIZER;
            c.job_secret = deputy::testing::kTestJobSecret;
            c.agent = sockets_[r].c_str();
            c.pool_bytes = pool_bytes;
            if (memory == Memory::staged) c.memory_mode = DP_MEMORY_STAGED;
            EXPECT_EQ(dp_init(&c, &members_[r].ctx), DP_OK);
        }
        std::vector<std::thread> joiners;
        status_.assign(size(), DP_OK);
        for (int r = 0; r < size(); ++r)
            joiners.emplace_back([&, r] {
                status_[size_t(r)] = dp_team_create_timeout(members_[size_t(r)].ctx, key.c_str(),
                                                            r, size(), timeout_ms,
                                                            &members_[size_t(r)].team);
            });
        for (auto &t : joiners) t.join();
    }
    ~SpanningTeam() {
        for (auto &m : members_) {
            if (m.team) dp_team_destroy(m.team);
            if (m.ctx) dp_finalize(m.ctx);
        }
        for (void *p : owned_) free(p);
    }
    int size() const { return int(members_.size()); }
    dp_status_t create_status(int r) const { return status_[size_t(r)]; }
    dp_team_t *team(int r) { return members_[size_t(r)].team; }
    dp_context_t *context(int r) { return members_[size_t(r)].ctx; }
    uint8_t *buffer(int r, size_t bytes) {
        bytes = std::max<size_t>(bytes, 64);
        if (memory_ == Memory::mapped)
            return static_cast<uint8_t *>(dp_malloc(members_[size_t(r)].ctx, bytes));
        void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
        owned_.push_back(p);
        if (memory_ == Memory::direct) {
            EXPECT_EQ(dp_mem_register(members_[size_t(r)].ctx, p, bytes), DP_OK);
        }
        return static_cast<uint8_t *>(p);
    }
    // Gives a buffer back (a registration, which the agent bounds, too).
    void release(int r, uint8_t *p) {
        if (memory_ == Memory::mapped) return dp_free(members_[size_t(r)].ctx, p);
        if (memory_ == Memory::direct) {
            EXPECT_EQ(dp_mem_deregister(members_[size_t(r)].ctx, p), DP_OK);
        }
        owned_.erase(std::find(owned_.begin(), owned_.end(), p));
        free(p);
    }
    std::vector<dp_status_t> run(const std::function<dp_status_t(int, dp_request_t **)> &post) {
        std::vector<dp_request_t *> reqs(members_.size());
        for (int r = 0; r < size(); ++r) EXPECT_EQ(post(r, &reqs[size_t(r)]), DP_OK) << "rank " << r;
        std::vector<dp_status_t> out;
        for (auto *q : reqs) {
            out.push_back(q ? dp_wait(q) : DP_ERR_INTERNAL);
            if (q) dp_request_free(q);
        }
        return out;
    }

  private:
    struct Member {
        dp_context_t *ctx = nullptr;
        dp_team_t *team = nullptr;
    };
    std::vector<int> node_of_;
    Memory memory_;
    std::vector<Member> members_;
    std::vector<std::string> sockets_;
    std::vector<dp_status_t> status_;
    std::vector<void *> owned_;
};

// One member attached to the agent of node `node` and joined to team `key`
// (a process of its own, for the tests that kill one).
struct NodeMember {
    dp_context_t *ctx = nullptr;
    dp_team_t *team = nullptr;
};
inline dp_status_t join_on_node(const NodeAgents &agents, int node, const std::string &key,
                                int rank, int size, NodeMember *m) {
    const std::string socket = agents.socket(node);
    dp_config_t c = DP_CONFIG_INITIALIZER;
    c.job_secret = kTestJobSecret;
    c.agent = socket.c_str();
    const dp_status_t s = dp_init(&c, &m->ctx);
    return s != DP_OK ? s : dp_team_create(m->ctx, key.c_str(), rank, size, &m->team);
}

}  // namespace deputy::testing
