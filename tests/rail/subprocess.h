// Runs a command as a child process with a hard time limit, collecting its
// stdout and stderr; the child is always reaped (killed first if it
// overstays), so a hung tool fails its test instead of hanging the suite.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

extern char **environ;

namespace deputy::test {

struct ProcessResult {
    int exit_code = -1;   // -1 when killed by a signal
    int signal = 0;
    bool timed_out = false;
    std::string out;
    std::string err;
};

class Child {
public:
    Child(const std::vector<std::string> &argv) {
        int out_pipe[2], err_pipe[2];
        if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return;
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
        posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        std::vector<char *> args;
        for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
        args.push_back(nullptr);
        if (posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
        posix_spawn_file_actions_destroy(&actions);
        close(out_pipe[1]);
        close(err_pipe[1]);
        out_fd_ = out_pipe[0];
        err_fd_ = err_pipe[0];
    }
    ~Child() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (out_fd_ >= 0) close(out_fd_);
        if (err_fd_ >= 0) close(err_fd_);
    }
    Child(const Child &) = delete;
    Child &operator=(const Child &) = delete;

    bool started() const { return pid_ > 0; }

    // Reads output until stderr contains `needle` or `timeout_s` passes.
    bool wait_for_stderr(const std::string &needle, double timeout_s) {
        double deadline = now() + timeout_s;
        while (result_.err.find(needle) == std::string::npos) {
            if (now() >= deadline || !pump(deadline)) return result_.err.find(needle) != std::string::npos;
        }
        return true;
    }

    // Collects output until the child exits, killing it after `timeout_s`.
    ProcessResult finish(double timeout_s) {
        double deadline = now() + timeout_s;
        while (out_fd_ >= 0 || err_fd_ >= 0) {
            if (now() >= deadline) {
                result_.timed_out = true;
                kill(pid_, SIGKILL);
                break;
            }
            pump(deadline);
        }
        int status = 0;
        if (!result_.timed_out) {
            // Pipes closed; the child exits promptly, but bound that too.
            while (waitpid(pid_, &status, WNOHANG) == 0) {
                if (now() >= deadline) {
                    result_.timed_out = true;
                    kill(pid_, SIGKILL);
                    break;
                }
                usleep(1000);
            }
        }
        if (result_.timed_out) waitpid(pid_, &status, 0);
        pid_ = -1;
        if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) result_.signal = WTERMSIG(status);
        return result_;
    }

    const std::string &err() const { return result_.err; }

private:
    static double now() {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
    }

    // One poll round over the open pipes; false when both are closed.
    bool pump(double deadline) {
        pollfd fds[2];
        int n = 0;
        if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
        if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
        if (n == 0) return false;
        int ms = int((deadline - now()) * 1000);
        if (ms < 0) ms = 0;
        if (poll(fds, nfds_t(n), ms > 100 ? 100 : ms) <= 0) return true;
        for (int i = 0; i < n; ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[65536];
            ssize_t got = read(fds[i].fd, buf, sizeof(buf));
            bool is_out = fds[i].fd == out_fd_;
            if (got <= 0) {
                close(fds[i].fd);
                (is_out ? out_fd_ : err_fd_) = -1;
            } else {
                (is_out ? result_.out : result_.err).append(buf, size_t(got));
            }
        }
        return true;
    }

    pid_t pid_ = -1;
    int out_fd_ = -1;
    int err_fd_ = -1;
    ProcessResult result_;
};

// The port in the server's "listening on HOST:PORT (provider ...)" log line, or -1.
inline int listening_port(const std::string &err) {
    size_t at = err.find("listening on ");
    if (at == std::string::npos) return -1;
    size_t end = err.find(" (provider", at);
    size_t colon = err.rfind(':', end);
    if (end == std::string::npos || colon == std::string::npos || colon < at) return -1;
    return std::atoi(err.substr(colon + 1, end - colon - 1).c_str());
}

// Lines of `text` that contain every one of `parts`.
inline int count_lines_with(const std::string &text, const std::vector<std::string> &parts) {
    int count = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        bool all = true;
        for (const auto &p : parts) all = all && line.find(p) != std::string::npos;
        count += all ? 1 : 0;
        start = end + 1;
    }
    return count;
}

inline ProcessResult run_command(const std::vector<std::string> &argv, double timeout_s) {
    Child child(argv);
    if (!child.started()) {
        ProcessResult r;
        r.err = "could not start " + argv[0];
        return r;
    }
    return child.finish(timeout_s);
}

}  // namespace deputy::test
