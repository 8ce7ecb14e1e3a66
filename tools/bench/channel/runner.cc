#include "bench/channel/runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "bench/channel/agent_peer.h"
#include "bench/channel/report.h"
#include "bench/channel/session.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::bench::channel {
namespace {

namespace ch = deputy::channel;

// After its own side is done, the parent waits this long (beyond the plan's
// timeout) for the child's result before killing it.
constexpr int64_t kChildGraceNs = 5'000'000'000;

int command_exit(const std::vector<SideResult> &sides) {
    bool mismatch = false;
    for (const SideResult &r : sides) {
        if (r.exit_code() == kExitError) return kExitError;
        if (r.exit_code() == kExitMismatch) mismatch = true;
    }
    return mismatch ? kExitMismatch : kExitOk;
}

// Reads everything the child writes until EOF or the deadline.
bool read_child(int fd, int64_t timeout_ns, std::string *out) {
    const uint64_t end = timing::now_ns() + uint64_t(timeout_ns);
    char buffer[4096];
    for (;;) {
        int64_t left = int64_t(end) - int64_t(timing::now_ns());
        if (left <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        int rc = poll(&p, 1, int(left / 1000000) + 1);
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) continue;
        ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n > 0) {
            out->append(buffer, size_t(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return n == 0;
    }
}

SideResult lost_child(const Plan &plan, const std::string &why) {
    SideResult r;
    r.role = role_name(Role::kConnect);
    r.transport = ch::transport_kind_name(plan.endpoint.kind);
    r.msg_size = plan.msg_size;
    r.status = DP_ERR_INTERNAL;
    r.error = "the peer process " + why;
    r.verdict = "no result";
    return r;
}

std::vector<SideResult> run_loopback_at(const Plan &plan) {
    std::unique_ptr<ch::EndpointListener> listener;
    if (dp_status_t s = ch::EndpointListener::open(plan.endpoint, &listener); s != DP_OK) {
        SideResult r = lost_child(plan, "was not started");
        r.role = role_name(Role::kListen);
        r.status = s;
        r.error = "cannot listen on " + plan.endpoint.address;
        return {r};
    }
    Plan child = plan;
    child.endpoint.address = listener->address();  // tcp: the real port
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return {lost_child(plan, "could not be started (pipe)")};
    UniqueFd from_child(fds[0]), to_parent(fds[1]);
    std::fflush(stdout);
    std::fflush(stderr);
    // fork without exec: no thread exists yet in this process, and the child
    // runs the same code on a copy of the resolved plan.
    pid_t pid = fork();
    if (pid < 0) return {lost_child(plan, "could not be started (fork)")};
    if (pid == 0) {
        from_child.reset();
        SideResult r = run_side(child, Role::kConnect, nullptr, plan.peer_cpus);
        std::string text = to_json(r).dump();
        size_t off = 0;
        while (off < text.size()) {
            ssize_t n = write(to_parent.get(), text.data() + off, text.size() - off);
            if (n <= 0) break;
            off += size_t(n);
        }
        // _exit: the parent's objects (listener, temp dir) are not ours to clean.
        _exit(r.exit_code());
    }
    to_parent.reset();
    std::vector<SideResult> sides;
    sides.push_back(run_side(plan, Role::kListen, listener.get(), plan.cpus));
    std::string text;
    bool complete = read_child(from_child.get(), plan.timeout_ns + kChildGraceNs, &text);
    if (!complete) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    try {
        if (!complete) throw std::runtime_error("timeout");
        sides.push_back(from_json(nlohmann::json::parse(text)));
    } catch (const std::exception &) {
        std::string why =
            !complete ? "did not finish in time and was killed"
            : WIFSIGNALED(status)
                ? fmt::format("was killed by signal {}", WTERMSIG(status))
                : fmt::format("exited with code {} without a result", WEXITSTATUS(status));
        sides.push_back(lost_child(plan, why));
        DP_APP_ERROR("[connect] {}", sides.back().error);
    }
    return sides;
}

// Both sides of one experiment; uds and shm sockets live in a private (0700)
// directory made for the run, so nobody else can connect to or replace them.
std::vector<SideResult> run_loopback(Plan plan) {
    if (plan.endpoint.kind == ch::TransportKind::kTcp) {
        plan.endpoint.address = "127.0.0.1:0";
        return run_loopback_at(plan);
    }
    char dir[] = "/tmp/deputy-channel-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        SideResult r = lost_child(plan, "was not started");
        r.role = role_name(Role::kListen);
        r.status = DP_ERR_IO;
        r.error = "cannot create a private directory under /tmp for the socket";
        return {r};
    }
    plan.endpoint.address = std::string(dir) + "/channel.sock";
    std::vector<SideResult> sides = run_loopback_at(plan);
    rmdir(dir);
    return sides;
}

// Both sides ran on this host, on one CLOCK_MONOTONIC (--loopback, or the
// agent's peer): a stream's receive time runs from the peer's first send
// (taken after the start barrier) to the last receive. That is the
// channel's own time for the messages, whatever the receiving thread was
// doing when its own clock started (waking from the barrier, or still
// waiting for a peer that woke late).
void receive_from_first_send(const Plan &plan, std::vector<SideResult> *sides) {
    if (plan.mode != Mode::kStream || sides->size() != 2) return;
    for (size_t i = 0; i < 2; ++i) {
        SideResult &rx = (*sides)[i];
        const SideResult &tx = (*sides)[1 - i];
        if (rx.received > 0 && tx.sent > 0 && tx.send_start_ns != 0 &&
            tx.send_start_ns < rx.recv_end_ns)
            rx.recv_start_ns = tx.send_start_ns;
    }
}

const SideResult *find_role(const std::vector<SideResult> &sides, const char *role) {
    for (const SideResult &r : sides)
        if (r.role == role) return &r;
    return nullptr;
}

// One line comparing the headline figure of the run and of its baseline.
void print_comparison(const Plan &plan, const std::vector<SideResult> &run,
                      const std::vector<SideResult> &base) {
    if (plan.mode == Mode::kPingpong) {
        const SideResult *a = find_role(run, "connect"), *b = find_role(base, "connect");
        if (!a || !b || a->latency.p50 <= 0 || b->latency.p50 <= 0) return;
        std::printf("# %s vs %s: one-way p50 %.3f vs %.3f usec (%.1fx lower)\n",
                    a->transport.c_str(), b->transport.c_str(), a->latency.p50 / 1e3,
                    b->latency.p50 / 1e3, b->latency.p50 / a->latency.p50);
    } else {
        const SideResult *a = find_role(run, "listen"), *b = find_role(base, "listen");
        if (!a || !b) return;
        const Rate ra = recv_rate(*a), rb = recv_rate(*b);
        if (ra.mpps <= 0 || rb.mpps <= 0) return;
        std::printf("# %s vs %s: listener receive %.4f vs %.4f Mpps, %.2f vs %.2f MB/sec (%.1fx)\n",
                    a->transport.c_str(), b->transport.c_str(), ra.mpps, rb.mpps, ra.mb_per_s,
                    rb.mb_per_s, ra.mpps / rb.mpps);
    }
    std::fflush(stdout);
}

}  // namespace

int run_command(const ChannelOptions &options, Plan &plan) {
    std::vector<SideResult> sides, baseline;
    if (plan.loopback) {
        sides = run_loopback(plan);
        receive_from_first_send(plan, &sides);
    } else if (plan.via_agent) {
        sides = run_via_agent(plan, options);
        receive_from_first_send(plan, &sides);
    } else {
        sides.push_back(run_side(plan, plan.role, nullptr, plan.cpus));
    }
    print_header(plan, sides);
    print_rows(plan, sides);
    int code = command_exit(sides);
    Plan base = plan;
    if (plan.compare) {
        // The same experiment over the baseline transport, right after, with
        // that transport's default buffering.
        base.endpoint.kind = plan.compare_kind;
        base.endpoint.options.buffer_bytes = 0;
        base.endpoint.allow_insecure_tcp = true;  // resolve() checked the consent
        baseline = run_loopback(base);
        receive_from_first_send(base, &baseline);
        print_header(base, baseline);
        print_rows(base, baseline);
        print_comparison(plan, sides, baseline);
        code = std::max(code, command_exit(baseline));
    }
    if (!options.out_file.empty() &&
        !write_json(options.out_file, options, plan, sides, plan.compare ? &baseline : nullptr))
        code = std::max(code, kExitError);
    return code;
}

}  // namespace deputy::bench::channel
