// The ranks of one `deputy launch` job: start N processes, pass output
// through, forward signals, end the job when one rank fails or the time is
// up, and compute the launcher's exit code.
//
// Each rank is its own process group (spawn.cc), so a signal for a rank
// reaches what it started too. Exits are observed with waitid(WNOWAIT) and
// the ranks are reaped only at the very end: until then each group's id
// cannot be reused, and the final SIGKILL to every group (which removes
// anything a rank left running) cannot hit a stranger.
//
// Exit code: the worst (largest) exit code of the ranks, a rank killed by a
// signal counting as 128+signal; except that ranks the launcher itself
// stopped (after another rank failed, on --timeout, or on a forwarded
// signal) and that died of that signal do not count: their death is the
// consequence, the first failure is the news. --timeout gives 124 (as
// timeout(1)); a SIGINT/SIGTERM/SIGHUP to the launcher gives at least
// 128+that signal.
#pragma once

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "cli/launch/signals.h"

namespace deputy::launch {

enum class OutputMode { kPlain, kPrefix, kSeparate };

struct JobSpec {
    int size = 1;
    std::string program;               // resolved path of command[0]
    std::vector<std::string> command;  // argv of every rank
    std::vector<std::string> env;      // "NAME=value" for every rank; DEPUTY_RANK is added
    OutputMode output = OutputMode::kPlain;
    std::string output_dir;  // kSeparate: <dir>/rank.<r>.out and .err
    double timeout_s = 0;    // 0: none
    double grace_s = 2.0;    // SIGTERM to SIGKILL
    // `deputy mpirun` runs one "rank", mpirun, and says so:
    std::string tool = "deputy launch";  // names the launcher in messages
    std::string name;                    // the process in messages; empty: "rank <r>"
    bool rank_env = true;                // add DEPUTY_RANK=<r> to env
    // Rank r is bound to rank_cpus[r % size] (--agent-cores); empty: unbound.
    std::vector<std::vector<int>> rank_cpus;
    int parent_death_signal = SIGKILL;   // to each rank if the launcher dies
    // The job's secret, handed to each rank on a socket it inherits
    // ($DEPUTY_JOB_SECRET_FD; client/job_secret.h): not in its environment,
    // which any process of the user can read. Empty: none.
    std::string secret;
};

// Runs the job to its end and returns the launcher's exit code. `tick` is
// called on every turn of the loop (at least every 200 ms).
int run_job(const JobSpec &spec, SignalFd &signals, const std::function<void()> &tick);

}  // namespace deputy::launch
