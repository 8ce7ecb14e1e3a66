// A real `deputy agent` process for tests: started with posix_spawn on a
// socket in a private temporary directory, stopped (or killed) by the test,
// with its fds and memfd mappings countable through /proc.
#pragma once

#include <deputy/deputy.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "target_command.h"

extern char **environ;

namespace deputy::testing {

inline std::string make_private_dir() {
    char tmpl[] = "/tmp/deputy-agent-test-XXXXXX";
    char *dir = mkdtemp(tmpl);  // mode 0700
    return dir ? dir : "";
}

// An agent configuration file holding `agent_keys` (the inside of its
// "agent" object), for `deputy agent --config path()`; removed with it.
struct AgentConfig {
    explicit AgentConfig(const std::string &agent_keys) : dir(make_private_dir()) {
        std::ofstream(path()) << R"({"agent": {)" << agent_keys << "}}";
    }
    ~AgentConfig() { std::filesystem::remove_all(dir); }
    AgentConfig(const AgentConfig &) = delete;
    AgentConfig &operator=(const AgentConfig &) = delete;
    std::string path() const { return dir + "/agent.json"; }
    std::string dir;
};

// The job secret the tests' teams share (dp_config_t.job_secret).
inline constexpr const char *kTestJobSecret = "test-job-secret-0123456789abcdef";

class AgentProcess {
  public:
    // extra: more `deputy agent` flags. capture_log: its stdout and stderr
    // go to log_path() instead of the test's output. env: more environment.
    // shell: sh words the agent's command line is appended to, run in the
    // agent's process: "ulimit -n 1024 && exec", or "exec setpriv
    // --bounding-set=-all --" (root without capabilities).
    //
    // The tests read the agent's /proc (fds, mappings, memory). Root may,
    // whatever the agent; another user only where the agent is dumpable,
    // so there the agent gets --dumpable, unless `extra` holds the word
    // "undumpable" (taken out): the agent as users run it.
    explicit AgentProcess(std::vector<std::string> extra = {}, bool capture_log = false,
                          std::vector<std::string> env = {}, std::string shell = "") {
        dir_ = make_private_dir();
        socket_ = dir_ + "/agent.sock";
        log_ = dir_ + "/agent.log";
        const auto undumpable = std::find(extra.begin(), extra.end(), "undumpable");
        if (undumpable != extra.end()) extra.erase(undumpable);
        else if (geteuid() != 0) extra.push_back("--dumpable");
        std::vector<std::string> args = target_command({DEPUTY_BIN, "agent", "--socket", socket_});
        if (std::find(extra.begin(), extra.end(), "-l") == extra.end())
            args.insert(args.end(), {"-l", "30"});
        args.insert(args.end(), extra.begin(), extra.end());
        if (!shell.empty())
            args.insert(args.begin(), {"/bin/sh", "-c", shell + " \"$@\"", "sh"});
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_strings;
        for (char **e = environ; *e; ++e) env_strings.push_back(*e);
        env_strings.insert(env_strings.end(), env.begin(), env.end());
        std::vector<char *> envp;
        for (auto &e : env_strings) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        if (capture_log) {
            posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                             0600);
            posix_spawn_file_actions_adddup2(&actions, 1, 2);
        }
        if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0)
            pid_ = -1;
        posix_spawn_file_actions_destroy(&actions);
        // Ready when the socket exists (the agent creates it after listen()).
        for (int i = 0; i < 500 && pid_ > 0; ++i) {
            struct stat st;
            if (stat(socket_.c_str(), &st) == 0) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    ~AgentProcess() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        std::string cmd = "rm -rf '" + dir_ + "'";
        [[maybe_unused]] int rc = system(cmd.c_str());
    }

    bool running() const { return pid_ > 0; }
    pid_t pid() const { return pid_; }
    const std::string &socket() const { return socket_; }
    const std::string &dir() const { return dir_; }
    const std::string &log_path() const { return log_; }
    // Resident memory of the agent (VmRSS), in KiB.
    long rss_kib() const {
        std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
        return -1;
    }
    bool alive() const { return pid_ > 0 && kill(pid_, 0) == 0 && !zombie(); }

    // Sends sig and reaps; returns the exit status as waitpid reports it.
    int stop(int sig = SIGTERM) {
        int status = -1;
        if (pid_ > 0) {
            kill(pid_, sig);
            waitpid(pid_, &status, 0);
            pid_ = -1;
        }
        return status;
    }

    // CPU time the agent has used (user + system), in seconds; with a
    // `tid`, that thread's alone.
    double cpu_seconds(pid_t tid = 0) const {
        std::ifstream stat("/proc/" + std::to_string(pid_) +
                           (tid ? "/task/" + std::to_string(tid) : std::string()) + "/stat");
        std::string line;
        std::getline(stat, line);
        std::istringstream rest(line.substr(line.rfind(')') + 2));
        std::string field;
        double ticks = 0;
        for (int i = 3; rest >> field; ++i)
            if (i == 14 || i == 15) ticks += std::stod(field);
        return ticks / double(sysconf(_SC_CLK_TCK));
    }
    int count_fds() const { return count_entries("fd"); }
    // The fd count once it has held still for `quiet_ms` (a baseline: an
    // agent just started may still hold a transient fd, e.g. the topology's
    // files being read), within timeout_ms.
    int settled_fds(int quiet_ms = 200, int timeout_ms = 5000) const {
        int last = count_fds(), still = 0;
        for (int waited = 0; waited < timeout_ms && still < quiet_ms; waited += 10) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            const int now = count_fds();
            still = now == last ? still + 10 : 0;
            last = now;
        }
        return last;
    }
    // Entries of /proc/<agent>/<dir>.
    int count_entries(const char *dir) const {
        int n = 0;
        std::string path = "/proc/" + std::to_string(pid_) + "/" + dir;
        if (DIR *d = opendir(path.c_str())) {
            while (dirent *e = readdir(d))
                if (e->d_name[0] != '.') ++n;
            closedir(d);
        }
        return n;
    }
    // What each open fd of the agent is ("3 socket:[123]", "7 anon_inode:[pidfd]"),
    // for the message of a failed fd count: which kind was left names the leak.
    std::string describe_fds() const {
        std::string out;
        std::string path = "/proc/" + std::to_string(pid_) + "/fd";
        if (DIR *d = opendir(path.c_str())) {
            while (dirent *e = readdir(d)) {
                if (e->d_name[0] == '.') continue;
                char target[256];
                ssize_t n = readlink((path + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = '\0';
                out += std::string(e->d_name) + " " + target + "\n";
            }
            closedir(d);
        }
        return out;
    }
    // Mappings of client segments (memfd "deputy-client-N").
    int count_client_mappings() const {
        std::ifstream maps("/proc/" + std::to_string(pid_) + "/maps");
        int n = 0;
        for (std::string line; std::getline(maps, line);)
            if (line.find("memfd:deputy-client") != std::string::npos) ++n;
        return n;
    }

    dp_config_t config() const {
        dp_config_t c = DP_CONFIG_INITIALIZER;
        c.agent = socket_.c_str();
        c.pool_bytes = 1 << 20;
        c.job_secret = kTestJobSecret;
        return c;
    }

  private:
    bool zombie() const {
        std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
        std::string line;
        std::getline(stat, line);
        const size_t paren = line.rfind(')');
        return paren == std::string::npos || line.size() < paren + 3 || line[paren + 2] == 'Z';
    }

    std::string dir_;
    std::string socket_;
    std::string log_;
    pid_t pid_ = -1;
};

// Waits until pred() or the timeout; returns pred()'s last value.
template <typename Pred>
bool eventually(Pred pred, int timeout_ms = 3000) {
    for (int waited = 0; waited < timeout_ms; waited += 5) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return pred();
}

}  // namespace deputy::testing
