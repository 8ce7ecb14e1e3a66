// The agent a `deputy launch` job talks to: the one clients would find
// ($DEPUTY_AGENT, else the default address) when it answers, else a private
// one this launcher starts and stops. `deputy mpirun` on one machine always
// starts a private one.
//
// A private agent is `deputy agent` (this very binary, /proc/self/exe) run in
// the foreground as a child, in its own process group (a Ctrl-C meant for
// the ranks does not reach it before they are done), with
//   --socket <mkdtemp 0700 dir>/agent.sock --token-file <dir>/token
//   [--config FILE] [--agent-cores LAYOUT]
// and a fresh 256-bit random token, which the ranks get as DEPUTY_TOKEN (the
// file is removed once the agent listens: it has read it by then). Its
// output goes to an unlinked file (or --agent-log) and is shown when the
// agent fails (agent_process.h). stop() sends SIGTERM, then SIGKILL after
// the grace period, and removes the directory. If the launcher itself is killed, the agent
// gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and removes its socket;
// only the empty directory remains.
#pragma once

#include <string>
#include <vector>

#include "cli/launch/agent_process.h"
#include "cli/launch/signals.h"

namespace deputy::launch {

struct AgentOptions {
    std::string config_file;  // --agent-config: passed as `deputy agent --config`
    std::string agent_cores;  // --agent-cores: passed on as is (launch/job_placement.h)
    std::string log_file;     // --agent-log: keep the private agent's log here
    double startup_timeout_s = 10.0;
    double grace_s = 2.0;
    std::string tool = "deputy launch";         // who says what in messages
    std::string dir_prefix = "deputy-launch-";  // of the private directory
    bool use_running = true;  // false: always a private agent, even if one answers
};

// The private agent's arguments for directory `dir` (argv[0] "deputy"; it
// runs as /proc/self/exe).
std::vector<std::string> private_agent_argv(const std::string &dir, const AgentOptions &options);

class JobAgent {
  public:
    enum class Outcome { kReady, kFailed, kInterrupted };

    JobAgent() = default;
    ~JobAgent() { stop(); }
    JobAgent(const JobAgent &) = delete;
    JobAgent &operator=(const JobAgent &) = delete;

    // Uses the agent that answers at the clients' address (unless
    // !options.use_running), or starts one.
    // kInterrupted: a SIGINT/SIGTERM/SIGHUP came while the agent was
    // starting (`*signal_out` says which); nothing is left running.
    Outcome acquire(const AgentOptions &options, SignalFd &signals, std::string *error,
                    int *signal_out);
    // Stops a private agent and removes its directory; nothing for an agent
    // that was already running. Idempotent.
    void stop();
    // Says once if the private agent ended while the job runs.
    void check();

    const std::string &address() const { return address_; }
    const std::string &token() const { return token_; }  // empty: not ours
    bool started() const { return !dir_.empty(); }
    // An agent that was already running: its `deputy info` JSON (empty when
    // it refused us or did not answer, and for a private agent).
    const std::string &running_info() const { return running_info_; }

  private:
    bool start(SignalFd &signals, std::string *error, int *signal_out, Outcome *outcome);

    AgentOptions options_;
    std::string address_;
    std::string token_;
    std::string dir_;  // the private directory; empty when the agent is not ours
    std::string running_info_;
    AgentProcess process_;
};

}  // namespace deputy::launch
