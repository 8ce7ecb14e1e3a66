// One process a launcher starts to serve its job: `deputy agent` itself
// (`deputy launch`, `deputy mpirun` on one machine) or the mpirun of an MPI
// job of agents (`deputy mpirun --nodes` or with a hostfile; docs/nodes.md).
//
// It runs in its own process group (a Ctrl-C meant for the ranks does not
// reach it before they are done) and gets SIGTERM if the launcher dies
// (PR_SET_PDEATHSIG): an agent removes its socket on SIGTERM, and mpirun
// passes SIGTERM on to its agents. Its stdout and stderr go to a log file
// that is unlinked at once unless the user keeps it (--agent-log); the log
// is read back through the open fd and shown when the process fails.
// stop() sends SIGTERM, then after the grace period SIGKILL to its group
// and to every process below it (mpirun's agents are in groups of their
// own, and would outlive a killed mpirun). An MPI job of agents is asked
// first with SIGUSR1, which MPI launchers pass on to their job's processes
// (Open MPI's mpirun answers SIGTERM by signalling its job itself, a second
// apart: SIGCONT, SIGTERM, SIGKILL, which kills agents inside MPI_Finalize).
#pragma once

#include <sys/types.h>

#include <csignal>

#include <functional>
#include <string>

#include "common/fd.h"
#include "cli/launch/signals.h"
#include "cli/launch/spawn.h"

namespace deputy::launch {

class AgentProcess {
  public:
    enum class Ready { kNotYet, kYes, kFailed };
    enum class Outcome { kReady, kFailed, kInterrupted };

    AgentProcess() = default;
    ~AgentProcess() { stop(); }
    AgentProcess(const AgentProcess &) = delete;
    AgentProcess &operator=(const AgentProcess &) = delete;

    // The names in messages ("deputy launch", "the agent"), the seconds
    // between SIGTERM and SIGKILL in stop(), and whether any exit after
    // stop()'s SIGTERM is a normal end (mpirun exits 1 when it ends its job
    // on a signal; an agent exits 0).
    void configure(std::string tool, std::string what, double grace_s,
                   bool any_exit_after_sigterm = false);
    // Starts `spec` (stdin /dev/null; stdout and stderr to `log_path`,
    // which is removed at once unless `keep_log`).
    bool start(SpawnSpec spec, const std::string &log_path, bool keep_log, std::string *error);
    // Calls `ready` (about every 10 ms) until it says kYes. kFailed: it said
    // so (with `*error` set), or the process exited, or `timeout_s` passed;
    // `*error` then says which ("<what> exited before <awaited>") and shows
    // the log. kInterrupted: a SIGINT, SIGTERM or SIGHUP came (`*signal_out`
    // says which). After kFailed and kInterrupted the caller stops it.
    Outcome wait_ready(const std::function<Ready(std::string *)> &ready, const std::string &awaited,
                       double timeout_s, SignalFd &signals, std::string *error, int *signal_out);
    // Says once (with the log) if the process ended while the job runs.
    void check();
    // True (and its wait status in `*status`) once the process has ended;
    // reaps it. For processes whose end is the news (a probe).
    bool finished(int *status);
    // Stops it (see above) and says how if it did not end well. Idempotent.
    // A `first_signal` other than SIGTERM gets a few seconds (at most the
    // grace period) before SIGTERM follows.
    void stop(int first_signal = SIGTERM);

    bool running() const { return pid_ > 0; }
    pid_t pid() const { return pid_; }
    std::string log_text() const;

  private:
    std::string tool_ = "deputy launch";
    std::string what_ = "the agent";
    double grace_s_ = 2.0;
    bool any_exit_after_sigterm_ = false;
    UniqueFd log_fd_;
    pid_t pid_ = -1;
    bool reported_exit_ = false;
};

// "exit code 3", "killed by SIGKILL".
std::string describe_status(int status);

}  // namespace deputy::launch
