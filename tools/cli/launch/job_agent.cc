#include "cli/launch/job_agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "channel/agent_address.h"
#include "channel/control.h"
#include "channel/transport/uds/transport.h"
#include "common/log.h"
#include "cli/launch/private_dir.h"
#include "cli/launch/secrets.h"
#include "cli/launch/spawn.h"

namespace deputy::launch {
namespace {

namespace control = channel::control;

enum class Probe { kNobody, kAnswered, kRefused, kSilent };

// Is an agent serving `address`? Asks it for its info the way `deputy info`
// does, with the token the ranks would present (DEPUTY_TOKEN).
// *info: the agent's JSON when it answered.
Probe probe(const std::string &address, std::string *reason, std::string *info) {
    UniqueFd fd;
    if (channel::uds::connect_fd(address, 0, &fd) != DP_OK) return Probe::kNobody;
    control::Attach m;
    m.purpose = control::Purpose::kInfo;
    if (const char *env = std::getenv("DEPUTY_TOKEN")) m.token = env;
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    channel::MsgType type;
    std::vector<uint8_t> answer;
    const int64_t timeout = 2'000'000'000;
    if (control::send_message(fd.get(), channel::MsgType::kAttach, payload, nullptr, 0, timeout,
                              "deputy launch") != DP_OK ||
        control::recv_message(fd.get(), control::kMaxControlMessage, &type, &answer, nullptr, 0,
                              nullptr, timeout, "deputy launch") != DP_OK)
        return Probe::kSilent;
    if (type != channel::MsgType::kReply) {
        info->assign(answer.begin(), answer.end());
        return Probe::kAnswered;
    }
    control::Reply reply;
    std::string error;
    control::decode(answer.data(), answer.size(), &reply, &error);
    *reason = reply.reason;
    return Probe::kRefused;
}

}  // namespace

std::vector<std::string> private_agent_argv(const std::string &dir, const AgentOptions &options) {
    std::vector<std::string> argv = {"deputy",       "agent", "--socket", dir + "/agent.sock",
                                     "--token-file", dir + "/token"};
    if (!options.config_file.empty()) {
        argv.push_back("--config");
        argv.push_back(options.config_file);
    }
    if (!options.agent_cores.empty()) {
        argv.push_back("--agent-cores");
        argv.push_back(options.agent_cores);
    }
    return argv;
}

JobAgent::Outcome JobAgent::acquire(const AgentOptions &options, SignalFd &signals,
                                    std::string *error, int *signal_out) {
    options_ = options;
    process_.configure(options.tool, "the agent", options.grace_s);
    address_ = channel::resolve_agent_address("");
    std::string reason;
    switch (options.use_running ? probe(address_, &reason, &running_info_) : Probe::kNobody) {
        case Probe::kAnswered:
            break;
        case Probe::kRefused:
            std::fprintf(stderr,
                         "%s: warning: the agent at %s refused us (%s); the ranks present "
                         "DEPUTY_TOKEN as given to the launcher\n",
                         options.tool.c_str(), address_.c_str(), reason.c_str());
            break;
        case Probe::kSilent:
            std::fprintf(stderr,
                         "%s: warning: %s accepted a connection but did not answer as an agent; "
                         "using it anyway\n",
                         options.tool.c_str(), address_.c_str());
            break;
        case Probe::kNobody: {
            Outcome outcome = Outcome::kReady;
            if (!start(signals, error, signal_out, &outcome)) stop();
            return outcome;
        }
    }
    DP_APP_DEBUG("{}: using the agent at {}", options.tool, address_);
    if (!options.config_file.empty())
        std::fprintf(stderr,
                     "%s: warning: --agent-config %s is ignored: the agent at %s already runs "
                     "with its own configuration\n",
                     options.tool.c_str(), options.config_file.c_str(), address_.c_str());
    // --agent-cores with a running agent: job_placement.h's overlap_warning
    // says what it could not do, from the agent's own placement.
    return Outcome::kReady;
}

bool JobAgent::start(SignalFd &signals, std::string *error, int *signal_out, Outcome *outcome) {
    *outcome = Outcome::kFailed;
    dir_ = make_private_dir(options_.dir_prefix, error);
    if (dir_.empty()) return false;
    address_ = dir_ + "/agent.sock";
    token_ = random_hex(32);
    const std::string token_file = dir_ + "/token";
    if (!write_token_file(token_file, token_, error)) return false;
    SpawnSpec spec;
    spec.path = "/proc/self/exe";
    spec.argv = private_agent_argv(dir_, options_);
    spec.env = environment_with({});
    const bool keep_log = !options_.log_file.empty();
    if (!process_.start(spec, keep_log ? options_.log_file : dir_ + "/agent.log", keep_log, error))
        return false;
    auto listening = [this](std::string *why) {
        struct stat st;
        if (stat(address_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
            return AgentProcess::Ready::kYes;
        *why = "no socket at " + address_;
        return AgentProcess::Ready::kNotYet;
    };
    switch (process_.wait_ready(listening, "it listened", options_.startup_timeout_s, signals,
                                error, signal_out)) {
        case AgentProcess::Outcome::kReady:
            // It read the token before it listened: no secret stays on disk,
            // even if the launcher is killed.
            unlink(token_file.c_str());
            *outcome = Outcome::kReady;
            return true;
        case AgentProcess::Outcome::kInterrupted:
            *outcome = Outcome::kInterrupted;
            return false;
        case AgentProcess::Outcome::kFailed:
            return false;
    }
    return false;
}

void JobAgent::check() { process_.check(); }

void JobAgent::stop() {
    process_.stop();
    remove_private_dir(dir_, options_.tool);
    dir_.clear();
}

}  // namespace deputy::launch
