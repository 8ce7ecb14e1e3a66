#include "cli/launch/job.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/launch/line_output.h"
#include "cli/launch/spawn.h"

namespace deputy::launch {
namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
    pid_t pid = -1;
    bool exited = false;
    bool counted = false;  // its code takes part in the exit code
    int code = 0;          // exit code, or 128+signal
    int term_signal = 0;   // the signal it died of; 0 when it exited
    bool core = false;
    uint64_t sent = 0;  // bit s: the launcher sent it signal s
    std::vector<LineSink *> sinks;
};

std::string plural(size_t n, const char *word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::microseconds(int64_t(seconds * 1e6));
}

class Job {
  public:
    Job(const JobSpec &spec, SignalFd &signals)
        : spec_(spec), signals_(signals), ranks_(size_t(spec.size)) {}
    int run(const std::function<void()> &tick);

  private:
    bool spawn_rank(int r);
    void check_ranks();
    void on_exit(int r);
    void send_all(int sig);
    void begin_stop(int sig);
    void kill_remaining(bool say);
    void on_launcher_signal(int sig);
    size_t running() const;
    // "rank 3" (or the spec's name) and "4 ranks" (or the name) for messages.
    std::string who(size_t r) const;
    std::string running_ones() const;
    const char *tool() const { return spec_.tool.c_str(); }
    void poll_once(int timeout_ms, bool with_signals);
    void finish();
    int exit_code() const;

    const JobSpec &spec_;
    SignalFd &signals_;
    std::vector<Rank> ranks_;
    std::vector<std::unique_ptr<LineSink>> sinks_;
    bool stopping_ = false;
    bool timed_out_ = false;
    int launcher_signal_ = 0;
    std::optional<Clock::time_point> job_deadline_, kill_deadline_;
};

bool Job::spawn_rank(int r) {
    Rank &rank = ranks_[size_t(r)];
    SpawnSpec s;
    s.path = spec_.program;
    s.argv = spec_.command;
    std::vector<std::string> env = spec_.env;
    if (spec_.rank_env) env.push_back("DEPUTY_RANK=" + std::to_string(r));
    UniqueFd secret_fd;
    if (!spec_.secret.empty()) {
        // Written now and our end closed: the rank reads the secret, then
        // end of file. A socket cannot be opened through /proc/<pid>/fd.
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0 ||
            write(pair[0], spec_.secret.data(), spec_.secret.size()) !=
                ssize_t(spec_.secret.size())) {
            std::fprintf(stderr, "%s: %s: cannot hand over the job secret: %s\n", tool(),
                         who(size_t(r)).c_str(), std::strerror(errno));
            rank.exited = rank.counted = true;
            rank.code = 1;
            return false;
        }
        close(pair[0]);
        secret_fd.reset(pair[1]);
        s.keep_fd = pair[1];
        env.push_back("DEPUTY_JOB_SECRET_FD=" + std::to_string(pair[1]));
    }
    s.env = environment_with(env);
    // A secret the launcher was given in its environment is not passed on:
    // the one on the socket is the job's.
    std::erase_if(s.env, [](const std::string &e) { return e.rfind("DEPUTY_JOB_SECRET=", 0) == 0; });
    s.parent_death_signal = spec_.parent_death_signal;
    if (!spec_.rank_cpus.empty()) s.cpus = spec_.rank_cpus[size_t(r) % spec_.rank_cpus.size()];
    // Ranks do not read the terminal (they are not its foreground group);
    // rank 0 gets a piped or redirected stdin.
    UniqueFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!(r == 0 && !isatty(STDIN_FILENO))) s.stdin_fd = null_fd.get();
    UniqueFd out_w, err_w;
    if (spec_.output == OutputMode::kPrefix) {
        const std::string prefix = "[" + std::to_string(r) + "] ";
        for (int stream : {STDOUT_FILENO, STDERR_FILENO}) {
            int p[2];
            if (pipe2(p, O_CLOEXEC) != 0) {
                std::fprintf(stderr, "%s: %s: pipe: %s\n", tool(), who(size_t(r)).c_str(),
                             std::strerror(errno));
                rank.exited = rank.counted = true;
                rank.code = 1;
                return false;
            }
            fcntl(p[0], F_SETFL, O_NONBLOCK);
            (stream == STDOUT_FILENO ? out_w : err_w).reset(p[1]);
            sinks_.push_back(std::make_unique<LineSink>(UniqueFd(p[0]), stream, prefix));
            rank.sinks.push_back(sinks_.back().get());
        }
    } else if (spec_.output == OutputMode::kSeparate) {
        const std::string base = spec_.output_dir + "/rank." + std::to_string(r);
        out_w.reset(open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        err_w.reset(open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (!out_w || !err_w) {
            std::fprintf(stderr, "%s: %s: cannot create %s.out/.err: %s\n", tool(),
                         who(size_t(r)).c_str(), base.c_str(), std::strerror(errno));
            rank.exited = rank.counted = true;
            rank.code = 1;
            return false;
        }
    }
    s.stdout_fd = out_w.get();
    s.stderr_fd = err_w.get();
    std::string error;
    int code = 1;
    rank.pid = spawn(s, &error, &code);
    if (rank.pid < 0) {
        std::fprintf(stderr, "%s: %s: %s\n", tool(), who(size_t(r)).c_str(), error.c_str());
        rank.exited = rank.counted = true;
        rank.code = code;
        return false;
    }
    return true;  // the write ends close here: the rank holds the only copies
}

void Job::check_ranks() {
    for (size_t r = 0; r < ranks_.size(); ++r) {
        Rank &rank = ranks_[r];
        if (rank.exited || rank.pid < 0) continue;
        siginfo_t info;
        std::memset(&info, 0, sizeof info);
        if (waitid(P_PID, id_t(rank.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
            info.si_pid != rank.pid)
            continue;
        rank.exited = true;
        if (info.si_code == CLD_EXITED) {
            rank.code = info.si_status;
        } else {
            rank.term_signal = info.si_status;
            rank.core = info.si_code == CLD_DUMPED;
            rank.code = 128 + info.si_status;
        }
        on_exit(int(r));
    }
}

void Job::on_exit(int r) {
    Rank &rank = ranks_[size_t(r)];
    for (LineSink *sink : rank.sinks)  // its last words before ours
        if (sink->open()) sink->on_readable();
    if (rank.term_signal && rank.term_signal < 64 && (rank.sent >> rank.term_signal) & 1) return;
    rank.counted = true;
    if (rank.code == 0) return;
    std::string what = rank.term_signal ? "was killed by " + signal_name(rank.term_signal) +
                                              (rank.core ? " (core dumped)" : "")
                                        : "exited with code " + std::to_string(rank.code);
    std::string next;
    if (!stopping_ && running() > 0) next = "; stopping the other " + plural(running(), "rank");
    std::fprintf(stderr, "%s: %s (pid %d) %s%s\n", tool(), who(size_t(r)).c_str(), int(rank.pid),
                 what.c_str(), next.c_str());
    if (!stopping_) begin_stop(SIGTERM);
}

std::string Job::who(size_t r) const {
    return spec_.name.empty() ? "rank " + std::to_string(r) : spec_.name;
}

std::string Job::running_ones() const {
    return spec_.name.empty() ? plural(running(), "rank") : spec_.name;
}

size_t Job::running() const {
    return size_t(std::count_if(ranks_.begin(), ranks_.end(),
                                [](const Rank &k) { return k.pid > 0 && !k.exited; }));
}

void Job::send_all(int sig) {
    for (Rank &rank : ranks_) {
        if (rank.pid < 0 || rank.exited) continue;
        rank.sent |= uint64_t(1) << sig;
        if (kill(-rank.pid, sig) != 0) kill(rank.pid, sig);  // it left its group
    }
}

void Job::begin_stop(int sig) {
    stopping_ = true;
    send_all(sig);
    kill_deadline_ = after(spec_.grace_s);
}

void Job::kill_remaining(bool say) {
    for (size_t r = 0; r < ranks_.size(); ++r)
        if (say && ranks_[r].pid > 0 && !ranks_[r].exited)
            std::fprintf(stderr,
                         "%s: %s (pid %d) did not stop within %g s; killing it\n", tool(),
                         who(r).c_str(), int(ranks_[r].pid), spec_.grace_s);
    // What a rank started in process groups of its own (mpirun's ranks)
    // goes too: it is found while the rank is still its parent.
    for (Rank &rank : ranks_)
        if (rank.pid > 0 && !rank.exited) kill_tree(rank.pid, SIGKILL);
    send_all(SIGKILL);
    kill_deadline_.reset();
}

void Job::on_launcher_signal(int sig) {
    if (!launcher_signal_) launcher_signal_ = sig;
    if (running() == 0) return;
    if (!stopping_) {
        std::fprintf(stderr, "%s: got %s; passing it to %s\n", tool(), signal_name(sig).c_str(),
                     running_ones().c_str());
        begin_stop(sig);
    } else {
        std::fprintf(stderr, "%s: got %s while stopping; killing %s\n", tool(),
                     signal_name(sig).c_str(), running_ones().c_str());
        kill_remaining(false);
    }
}

void Job::poll_once(int timeout_ms, bool with_signals) {
    std::vector<pollfd> fds;
    std::vector<LineSink *> owners;
    if (with_signals) {
        fds.push_back({signals_.fd(), POLLIN, 0});
        owners.push_back(nullptr);
    }
    for (auto &sink : sinks_)
        if (sink->open()) {
            fds.push_back({sink->fd(), POLLIN, 0});
            owners.push_back(sink.get());
        }
    if (fds.empty()) return;
    if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        if (owners[i]) {
            owners[i]->on_readable();
            continue;
        }
        for (int sig : signals_.take())
            if (sig != SIGCHLD) on_launcher_signal(sig);
    }
}

int Job::run(const std::function<void()> &tick) {
    if (spec_.output == OutputMode::kSeparate) {
        std::error_code ec;
        std::filesystem::create_directories(spec_.output_dir, ec);
    }
    if (spec_.timeout_s > 0) job_deadline_ = after(spec_.timeout_s);
    for (int r = 0; r < spec_.size; ++r) {
        if (spawn_rank(r)) continue;
        if (running() > 0) {
            std::fprintf(stderr, "%s: stopping the %s already started\n", tool(),
                         plural(running(), "rank").c_str());
            begin_stop(SIGTERM);
        }
        break;
    }
    for (;;) {
        check_ranks();
        tick();
        if (running() == 0) break;
        const auto now = Clock::now();
        if (job_deadline_ && now >= *job_deadline_) {
            job_deadline_.reset();
            if (!stopping_) {
                timed_out_ = true;
                std::fprintf(stderr,
                             "%s: timeout: the job ran for %g s (--timeout); "
                             "stopping %s\n",
                             tool(), spec_.timeout_s, running_ones().c_str());
                begin_stop(SIGTERM);
            }
        }
        if (kill_deadline_ && now >= *kill_deadline_) kill_remaining(true);
        auto wait = std::chrono::milliseconds(200);
        // Not a loop over {job_deadline_, kill_deadline_}: that copies the
        // optionals, and GCC 12 -O3 then warns maybe-uninitialized (-Werror).
        auto shorten = [&](const auto &deadline) {
            if (deadline)
                wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(*deadline - now));
        };
        shorten(job_deadline_);
        shorten(kill_deadline_);
        poll_once(int(std::max<int64_t>(wait.count(), 0)), true);
    }
    finish();
    return exit_code();
}

void Job::finish() {
    // Whatever a rank left running dies with the job. The leaders are
    // zombies until reaped below, so every group id is still ours.
    for (Rank &rank : ranks_)
        if (rank.pid > 0) kill(-rank.pid, SIGKILL);
    for (Rank &rank : ranks_)
        if (rank.pid > 0)
            while (waitpid(rank.pid, nullptr, 0) < 0 && errno == EINTR) {
            }
    // Output still in the pipes; a process that escaped its group could
    // hold a pipe open, so this is bounded.
    const auto end = after(2.0);
    while (Clock::now() < end &&
           std::any_of(sinks_.begin(), sinks_.end(), [](const auto &s) { return s->open(); }))
        poll_once(50, false);
    for (auto &sink : sinks_)
        if (sink->open()) sink->close();
}

int Job::exit_code() const {
    int worst = 0;
    for (const Rank &rank : ranks_)
        if (rank.counted) worst = std::max(worst, rank.code);
    if (timed_out_) return 124;
    if (launcher_signal_) return std::max(worst, 128 + launcher_signal_);
    return worst;
}

}  // namespace

int run_job(const JobSpec &spec, SignalFd &signals, const std::function<void()> &tick) {
    Job job(spec, signals);
    return job.run(tick);
}

}  // namespace deputy::launch
