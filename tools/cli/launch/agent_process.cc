#include "cli/launch/agent_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/log.h"

namespace deputy::launch {
namespace {

using Clock = std::chrono::steady_clock;

// How long a stop by a signal other than SIGTERM may take before SIGTERM
// follows (an MPI job of agents finalizes in milliseconds).
constexpr double kPoliteStopSeconds = 3.0;

Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::microseconds(int64_t(seconds * 1e6));
}

}  // namespace

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
    return "status " + std::to_string(status);
}

void AgentProcess::configure(std::string tool, std::string what, double grace_s,
                             bool any_exit_after_sigterm) {
    tool_ = std::move(tool);
    what_ = std::move(what);
    grace_s_ = grace_s;
    any_exit_after_sigterm_ = any_exit_after_sigterm;
}

bool AgentProcess::start(SpawnSpec spec, const std::string &log_path, bool keep_log,
                         std::string *error) {
    log_fd_.reset(open(log_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!log_fd_ || !null_fd) {
        *error = "cannot open the log " + log_path + ": " + std::strerror(errno);
        return false;
    }
    // Without --agent-log the name is gone at once: the log is read back
    // through this fd, and nothing of it stays on disk.
    if (!keep_log) unlink(log_path.c_str());
    spec.stdin_fd = null_fd.get();
    spec.stdout_fd = log_fd_.get();
    spec.stderr_fd = log_fd_.get();
    spec.parent_death_signal = SIGTERM;
    int code = 0;
    pid_ = spawn(spec, error, &code);
    reported_exit_ = false;
    if (pid_ < 0) return false;
    DP_APP_DEBUG("{}: started {} (pid {}): {}", tool_, what_, pid_, command_line(spec.argv));
    return true;
}

AgentProcess::Outcome AgentProcess::wait_ready(const std::function<Ready(std::string *)> &ready,
                                               const std::string &awaited, double timeout_s,
                                               SignalFd &signals, std::string *error,
                                               int *signal_out) {
    const auto deadline = after(timeout_s);
    for (;;) {
        std::string why;
        switch (ready(&why)) {
            case Ready::kYes:
                return Outcome::kReady;
            case Ready::kFailed:
                *error = why + "; the log of " + what_ + ":\n" + log_text();
                return Outcome::kFailed;
            case Ready::kNotYet:
                break;
        }
        int status;
        if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            *error = what_ + " exited before " + awaited + " (" + describe_status(status) +
                     "); its log:\n" + log_text();
            return Outcome::kFailed;
        }
        if (Clock::now() > deadline) {
            *error = what_ + " was not ready within " + std::to_string(int(timeout_s)) + " s" +
                     (why.empty() ? "" : " (" + why + ")") + "; its log:\n" + log_text();
            return Outcome::kFailed;
        }
        pollfd p{signals.fd(), POLLIN, 0};
        poll(&p, 1, 10);
        for (int sig : signals.take()) {
            if (sig == SIGCHLD) continue;
            *signal_out = sig;
            return Outcome::kInterrupted;
        }
    }
}

void AgentProcess::check() {
    if (pid_ < 0 || reported_exit_) return;
    int status;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return;
    pid_ = -1;
    reported_exit_ = true;
    std::fprintf(stderr, "%s: %s ended during the job (%s); its log:\n%s", tool_.c_str(),
                 what_.c_str(), describe_status(status).c_str(), log_text().c_str());
}

bool AgentProcess::finished(int *status) {
    if (pid_ <= 0 || waitpid(pid_, status, WNOHANG) != pid_) return false;
    pid_ = -1;
    reported_exit_ = true;
    return true;
}

void AgentProcess::stop(int first_signal) {
    if (pid_ <= 0) return;
    int status = 0;
    pid_t r = 0;
    const auto wait_for_exit = [&](double seconds) {
        const auto deadline = after(seconds);
        while ((r = waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    };
    bool sent_sigterm = first_signal == SIGTERM;
    kill(pid_, first_signal);
    // A polite stop that is not SIGTERM is given a short while of its own:
    // what should take milliseconds must not add the grace period twice.
    wait_for_exit(sent_sigterm ? grace_s_ : std::min(grace_s_, kPoliteStopSeconds));
    if (r == 0 && !sent_sigterm) {
        DP_APP_DEBUG("{}: {} did not end within {} s of {}; sending SIGTERM", tool_, what_,
                     std::min(grace_s_, kPoliteStopSeconds), signal_name(first_signal));
        sent_sigterm = true;
        kill(pid_, SIGTERM);
        wait_for_exit(grace_s_);
    }
    if (r == 0) {
        std::fprintf(stderr, "%s: %s did not stop within %g s of SIGTERM; killing it\n",
                     tool_.c_str(), what_.c_str(), grace_s_);
        kill_tree(pid_, SIGKILL);
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
    } else if (r == pid_ && !(sent_sigterm && any_exit_after_sigterm_) &&
               !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::fprintf(stderr, "%s: %s stopped with %s; its log:\n%s", tool_.c_str(), what_.c_str(),
                     describe_status(status).c_str(), log_text().c_str());
    } else if (r == pid_) {
        DP_APP_DEBUG("{}: {} stopped on {} ({})", tool_, what_,
                     signal_name(sent_sigterm ? SIGTERM : first_signal), describe_status(status));
    }
    pid_ = -1;
}

std::string AgentProcess::log_text() const {
    std::string text;
    char buf[4096];
    ssize_t n;
    for (off_t at = 0; log_fd_ && (n = pread(log_fd_.get(), buf, sizeof buf, at)) > 0; at += n)
        text.append(buf, size_t(n));
    if (text.empty()) return "  (empty)\n";
    if (text.back() != '\n') text += '\n';
    return text;
}

}  // namespace deputy::launch
