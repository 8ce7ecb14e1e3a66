#include "launch/job_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "channel/agent_address.h"
#include "channel/control.h"
#include "channel/transport/uds/transport.h"
#include "common/log.h"
#include "launch/spawn.h"

namespace deputy::launch {
namespace {

namespace control = channel::control;
using Clock = std::chrono::steady_clock;

enum class Probe { kNobody, kAnswered, kRefused, kSilent };

// Is an agent serving `address`? Asks it for its info the way `deputy info`
// does, with the token the ranks would present (DEPUTY_TOKEN).
Probe probe(const std::string &address, std::string *reason) {
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
    if (type != channel::MsgType::kReply) return Probe::kAnswered;
    control::Reply reply;
    std::string error;
    control::decode(answer.data(), answer.size(), &reply, &error);
    *reason = reply.reason;
    return Probe::kRefused;
}

std::string temp_base() {
    // A socket path must fit sockaddr_un (108 bytes): fall back to /tmp for
    // a long $TMPDIR.
    const char *tmp = std::getenv("TMPDIR");
    if (tmp && *tmp && std::strlen(tmp) < sizeof(sockaddr_un::sun_path) - 40) return tmp;
    return "/tmp";
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
    return "status " + std::to_string(status);
}

}  // namespace

std::string random_hex(size_t bytes) {
    std::vector<unsigned char> buf(bytes);
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return {};
        got += size_t(n);
    }
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : buf) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

JobAgent::Outcome JobAgent::acquire(const AgentOptions &options, SignalFd &signals,
                                    std::string *error, int *signal_out) {
    options_ = options;
    address_ = channel::resolve_agent_address("");
    std::string reason;
    switch (probe(address_, &reason)) {
        case Probe::kAnswered:
            break;
        case Probe::kRefused:
            std::fprintf(stderr,
                         "deputy launch: warning: the agent at %s refused us (%s); the ranks "
                         "present DEPUTY_TOKEN as given to the launcher\n",
                         address_.c_str(), reason.c_str());
            break;
        case Probe::kSilent:
            std::fprintf(
                stderr,
                "deputy launch: warning: %s accepted a connection but did not answer as an "
                "agent; using it anyway\n",
                address_.c_str());
            break;
        case Probe::kNobody: {
            Outcome outcome = Outcome::kReady;
            if (!start(signals, error, signal_out, &outcome)) stop();
            return outcome;
        }
    }
    log::app().debug("deputy launch: using the agent at {}", address_);
    if (!options.config_file.empty())
        std::fprintf(stderr,
                     "deputy launch: warning: --agent-config %s is ignored: the agent at %s "
                     "already runs with its own configuration\n",
                     options.config_file.c_str(), address_.c_str());
    return Outcome::kReady;
}

bool JobAgent::start(SignalFd &signals, std::string *error, int *signal_out, Outcome *outcome) {
    *outcome = Outcome::kFailed;
    std::string templ = temp_base() + "/deputy-launch-XXXXXX";
    if (!mkdtemp(templ.data())) {  // mode 0700
        *error = "cannot create a directory for the agent (" + templ + "): " + std::strerror(errno);
        return false;
    }
    dir_ = templ;
    address_ = dir_ + "/agent.sock";
    token_ = random_hex(32);
    const std::string token_file = dir_ + "/token";
    UniqueFd tf(open(token_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    const std::string line = token_ + "\n";
    if (token_.empty() || !tf ||
        write(tf.get(), line.data(), line.size()) != ssize_t(line.size())) {
        *error = "cannot write a token file in " + dir_;
        return false;
    }
    tf.reset();
    // The log is read back through this fd; without --agent-log its name is
    // gone at once, so the directory only ever holds the socket and, until
    // the agent has read it, the token.
    const std::string log_path =
        options_.log_file.empty() ? dir_ + "/agent.log" : options_.log_file;
    log_fd_.reset(open(log_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!log_fd_ || !null_fd) {
        *error = "cannot open the agent's log " + log_path + ": " + std::strerror(errno);
        return false;
    }
    if (options_.log_file.empty()) unlink(log_path.c_str());
    SpawnSpec spec;
    spec.path = "/proc/self/exe";
    spec.argv = {"deputy", "agent", "--socket", address_, "--token-file", token_file};
    if (!options_.config_file.empty()) {
        spec.argv.push_back("--config");
        spec.argv.push_back(options_.config_file);
    }
    spec.env = environment_with({});
    spec.stdin_fd = null_fd.get();
    spec.stdout_fd = log_fd_.get();
    spec.stderr_fd = log_fd_.get();
    spec.parent_death_signal = SIGTERM;  // it cleans its socket up on SIGTERM
    int code = 0;
    pid_ = spawn(spec, error, &code);
    if (pid_ < 0) return false;
    log::app().debug("deputy launch: started agent pid {} on {}", pid_, address_);

    const auto deadline =
        Clock::now() + std::chrono::milliseconds(int64_t(options_.startup_timeout_s * 1000));
    for (;;) {
        struct stat st;
        if (stat(address_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
            // It read the token before it listened: no secret stays on disk,
            // even if the launcher is killed.
            unlink(token_file.c_str());
            *outcome = Outcome::kReady;
            return true;
        }
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            *error = "the agent exited before it listened (" + describe_status(status) +
                     "); its log:\n" + log_text();
            return false;
        }
        if (Clock::now() > deadline) {
            *error = "the agent did not listen on " + address_ + " within " +
                     std::to_string(int(options_.startup_timeout_s)) + " s; its log:\n" +
                     log_text();
            return false;
        }
        pollfd p{signals.fd(), POLLIN, 0};
        poll(&p, 1, 10);
        for (int sig : signals.take()) {
            if (sig == SIGCHLD) continue;
            *signal_out = sig;
            *outcome = Outcome::kInterrupted;
            return false;
        }
    }
}

void JobAgent::check() {
    if (pid_ < 0 || reported_exit_) return;
    int status;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return;
    pid_ = -1;
    reported_exit_ = true;
    std::fprintf(stderr, "deputy launch: the agent (%s) ended during the job (%s); its log:\n%s",
                 address_.c_str(), describe_status(status).c_str(), log_text().c_str());
}

void JobAgent::stop() {
    if (pid_ > 0) {
        kill(pid_, SIGTERM);
        const auto deadline =
            Clock::now() + std::chrono::milliseconds(int64_t(options_.grace_s * 1000));
        int status = 0;
        pid_t r;
        while ((r = waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (r == 0) {
            std::fprintf(stderr,
                         "deputy launch: the agent did not stop within %.1f s of SIGTERM; "
                         "killing it\n",
                         options_.grace_s);
            kill(pid_, SIGKILL);
            waitpid(pid_, &status, 0);
        } else if (r == pid_ && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            std::fprintf(stderr, "deputy launch: the agent stopped with %s; its log:\n%s",
                         describe_status(status).c_str(), log_text().c_str());
        }
        pid_ = -1;
    }
    if (!dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        if (ec)
            std::fprintf(stderr, "deputy launch: cannot remove %s: %s\n", dir_.c_str(),
                         ec.message().c_str());
        dir_.clear();
    }
}

std::string JobAgent::log_text() const {
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
