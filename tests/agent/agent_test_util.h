// A real `deputy agent` process for tests: started with posix_spawn on a
// socket in a private temporary directory, stopped (or killed) by the test,
// with its fds and memfd mappings countable through /proc.
#pragma once

#include <deputy/deputy.h>
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace deputy::testing {

inline std::string make_private_dir() {
    char tmpl[] = "/tmp/deputy-agent-test-XXXXXX";
    char *dir = mkdtemp(tmpl);  // mode 0700
    return dir ? dir : "";
}

// The job secret the tests' teams share (dp_config_t.job_secret).
inline constexpr const char *kTestJobSecret = "test-job-secret-0123456789abcdef";

class AgentProcess {
  public:
    // extra: more `deputy agent` flags.
    explicit AgentProcess(std::vector<std::string> extra = {}) {
        dir_ = make_private_dir();
        socket_ = dir_ + "/agent.sock";
        std::vector<std::string> args = {DEPUTY_BIN, "agent", "--socket", socket_, "-l", "30"};
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        if (posix_spawn(&pid_, DEPUTY_BIN, nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
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

    int count_fds() const {
        int n = 0;
        std::string path = "/proc/" + std::to_string(pid_) + "/fd";
        if (DIR *d = opendir(path.c_str())) {
            while (dirent *e = readdir(d))
                if (e->d_name[0] != '.') ++n;
            closedir(d);
        }
        return n;
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
    std::string dir_;
    std::string socket_;
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
