// hostile_client (tests/agent/hostile_client.cc) as a process of the
// test's: started with the agent's socket and an attack, its stdin ours to
// close (which ends the attacks that hold until then), its "key value"
// lines read as they come. hostile_test.cc runs attacks to their end with
// it, same_user_test.cc in the background.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "agent_test_util.h"

namespace deputy::testing {

class Attacker {
  public:
    Attacker(const AgentProcess &agent, std::vector<std::string> args,
             std::vector<std::string> env = {}) {
        args.insert(args.begin(), {HOSTILE_CLIENT_BIN, agent.socket()});
        args = target_command(std::move(args));
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_strings;
        for (char **e = environ; *e; ++e)
            if (std::strncmp(*e, "DEPUTY_JOB_SECRET=", 18) != 0) env_strings.push_back(*e);
        env_strings.insert(env_strings.end(), env.begin(), env.end());
        std::vector<char *> envp;
        for (auto &e : env_strings) envp.push_back(e.data());
        envp.push_back(nullptr);
        int in[2], out[2];
        if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, in[0], 0);
        posix_spawn_file_actions_adddup2(&actions, out[1], 1);
        if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0)
            pid_ = -1;
        posix_spawn_file_actions_destroy(&actions);
        close(in[0]);
        close(out[1]);
        in_ = in[1];
        out_ = out[0];
    }
    ~Attacker() { finish(); }
    pid_t pid() const { return pid_; }

    // Reads its output until it said `key` (true) or timeout_ms passed.
    bool wait_for(const std::string &key, int timeout_ms) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (!said.count(key)) {
            const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     end - std::chrono::steady_clock::now())
                                     .count());
            if (left <= 0 || !read_some(left)) return said.count(key) != 0;
        }
        return true;
    }
    // Writes a line to its stdin.
    void send(const std::string &line) {
        [[maybe_unused]] ssize_t n = write(in_, (line + "\n").data(), line.size() + 1);
    }
    // Closes its stdin and reads everything it says until every writer of
    // its stdout is gone (a forked grandchild reports there too), killing it
    // after timeout_s. Returns its exit code.
    int finish(int timeout_s = 30) {
        if (pid_ <= 0) return exit_code_;
        if (in_ >= 0) close(in_), in_ = -1;
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
        while (std::chrono::steady_clock::now() < end && !eof_) read_some(1000);
        if (!eof_) output += "\n(killed at the timeout)";
        kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        close(out_);
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
    }
    long number(const std::string &key) const {
        auto it = said.find(key);
        return it == said.end() ? -1 : std::stol(it->second);
    }

    std::map<std::string, std::string> said;
    std::string output;

  private:
    // False at EOF or when nothing came within timeout_ms.
    bool read_some(int timeout_ms) {
        pollfd p{out_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return false;
        char buf[4096];
        const ssize_t n = read(out_, buf, sizeof buf);
        if (n <= 0) {
            eof_ = true;
            return false;
        }
        partial_.append(buf, size_t(n));
        output.append(buf, size_t(n));
        for (size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
            const std::string line = partial_.substr(0, nl);
            partial_.erase(0, nl + 1);
            const size_t sp = line.find(' ');
            if (sp != std::string::npos) said[line.substr(0, sp)] = line.substr(sp + 1);
        }
        return true;
    }

    pid_t pid_ = -1;
    int in_ = -1, out_ = -1;
    int exit_code_ = -1;
    bool eof_ = false;
    std::string partial_;
};

}  // namespace deputy::testing
