#include "cli/launch/launch_command.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/cli_common.h"
#include "common/log.h"
#include "cli/launch/job.h"
#include "cli/launch/job_agent.h"
#include "cli/launch/job_placement.h"
#include "cli/launch/secrets.h"
#include "cli/launch/signals.h"
#include "cli/launch/spawn.h"

namespace deputy::tools {
namespace {

struct LaunchFlags {
    int size = 0;
    std::string agent_config;
    std::string agent_log;
    std::string agent_cores;
    std::string output;  // empty: prefix for N > 1, plain for 1
    std::string output_dir;
    double timeout_s = 0;
    double grace_s = 2.0;
    std::vector<std::string> command;
    cli::LogFlags log;
};

int launch(const LaunchFlags &f, const launch::JobPlacement &placement) {
    launch::JobSpec job;
    job.size = f.size;
    job.command = f.command;
    job.program = launch::find_program(f.command[0]);
    if (job.program.empty()) {
        std::fprintf(stderr, "deputy launch: cannot find '%s' in PATH\n", f.command[0].c_str());
        return 127;
    }
    std::string output = f.output;
    if (output.empty())
        output = !f.output_dir.empty() ? "separate" : f.size > 1 ? "prefix" : "plain";
    job.output = output == "plain"    ? launch::OutputMode::kPlain
                 : output == "prefix" ? launch::OutputMode::kPrefix
                                      : launch::OutputMode::kSeparate;
    job.output_dir = f.output_dir;
    job.timeout_s = f.timeout_s;
    job.grace_s = f.grace_s;
    job.rank_cpus = placement.placement.rank_slots;

    launch::SignalFd signals;
    if (!signals.ok()) {
        std::fprintf(stderr, "deputy launch: signalfd: %s\n", std::strerror(errno));
        return 1;
    }
    launch::AgentOptions agent_options;
    agent_options.config_file = f.agent_config;
    agent_options.agent_cores = f.agent_cores;
    agent_options.log_file = f.agent_log;
    agent_options.grace_s = f.grace_s;
    launch::JobAgent agent;
    std::string error;
    int sig = 0;
    switch (agent.acquire(agent_options, signals, &error, &sig)) {
        case launch::JobAgent::Outcome::kReady:
            break;
        case launch::JobAgent::Outcome::kInterrupted:
            std::fprintf(stderr,
                         "deputy launch: got %s while starting the agent; nothing was run\n",
                         launch::signal_name(sig).c_str());
            return 128 + sig;
        case launch::JobAgent::Outcome::kFailed:
            std::fprintf(stderr, "deputy launch: %s\n", error.c_str());
            return 1;
    }
    if (placement.requested)
        std::fprintf(stderr, "deputy launch: %s\n",
                     launch::describe_job_placement(placement, f.size).c_str());
    // A running agent says where its engines run; ours follows the layout.
    const std::vector<int> engines =
        agent.started() ? placement.engine_cpus()
                        : launch::running_engine_cpus(placement, agent.running_info());
    const std::string overlap = launch::overlap_warning(placement, f.size, engines,
                                                        agent.started() ? "" : agent.address());
    if (!overlap.empty()) std::fprintf(stderr, "deputy launch: warning: %s\n", overlap.c_str());
    // The job secret: what makes the ranks of this job, and no other
    // process, members of its teams (docs/agent.md, "Teams and jobs").
    const std::string secret = launch::random_hex(32);
    if (secret.empty()) {
        std::fprintf(stderr, "deputy launch: the kernel gave no random bytes for the job secret\n");
        agent.stop();
        return 1;
    }
    job.env = {"DEPUTY_SIZE=" + std::to_string(f.size), "DEPUTY_AGENT=" + agent.address(),
               "DEPUTY_JOB=job-" + std::to_string(getpid()) + "-" + launch::random_hex(4)};
    job.secret = secret;
    if (!agent.token().empty()) job.env.push_back("DEPUTY_TOKEN=" + agent.token());
    int rc = launch::run_job(job, signals, [&agent] { agent.check(); });
    agent.stop();
    return rc;
}

}  // namespace

void register_launch(CLI::App &app) {
    auto f = std::make_shared<LaunchFlags>();
    CLI::App *cmd = app.add_subcommand(
        "launch",
        "run N ranks of a program with an agent (DEPUTY_RANK, DEPUTY_SIZE, DEPUTY_AGENT, "
        "DEPUTY_JOB, DEPUTY_JOB_SECRET); starts a private agent when none answers");
    cmd->add_option("-n,--np", f->size, "number of ranks")->required()->check(CLI::Range(1, 4096));
    cmd->add_option("--agent-config", f->agent_config,
                    "config for the agent launch starts (`deputy agent --config`)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--agent-log", f->agent_log, "keep the started agent's log in this file");
    cmd->add_option("--agent-cores", f->agent_cores,
                    "placement: last (the last core of each socket for the agent, the ranks "
                    "bound to the others), N (cores), cpus:LIST, smt (the agent on the SMT "
                    "siblings of the ranks' cores) or shared (nothing pinned, the default, with "
                    "a warning unless given); docs/launch.md");
    cmd->add_option("--output", f->output,
                    "prefix: lines as \"[rank] ...\" (default for n > 1); plain: inherited "
                    "(default for n = 1); separate: files in --output-dir")
        ->check(CLI::IsMember({"prefix", "plain", "separate"}));
    cmd->add_option("--output-dir", f->output_dir,
                    "directory for rank.<r>.out and rank.<r>.err (implies --output separate)");
    cmd->add_option("--timeout", f->timeout_s, "stop the job after this many seconds (exit 124)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--grace", f->grace_s, "seconds between SIGTERM and SIGKILL when stopping")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd->add_option("prog args", f->command, "the program every rank runs, with its arguments")
        ->required();
    // Everything from the program on is the ranks' (`--` before it optional).
    cmd->positionals_at_end();
    cli::add_log_flags(*cmd, &f->log);
    cmd->callback([f] {
        cli::apply_log_flags(f->log);
        // "No agent at the default address" is the normal case here.
        if (f->log.sdk_log_level.empty()) log::set_sdk_level(*log::parse_level("20"));
        if (f->output == "separate" && f->output_dir.empty())
            throw CLI::ValidationError("--output separate needs --output-dir DIR");
        if (!f->output_dir.empty() && !f->output.empty() && f->output != "separate")
            throw CLI::ValidationError("--output-dir goes with --output separate, not " +
                                       f->output);
        launch::JobPlacement placement;
        std::string error;
        if (!launch::plan_job_placement(f->agent_cores, &placement, &error))
            throw CLI::ValidationError(error);
        int rc = launch(*f, placement);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace deputy::tools
