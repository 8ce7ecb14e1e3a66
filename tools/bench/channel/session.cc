#include "bench/channel/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <thread>

#include "bench/channel/payload.h"
#include "channel/hello.h"
#include "common/affinity.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::bench::channel {
namespace {

namespace ch = deputy::channel;
using ch::MsgType;

constexpr uint8_t kFlagOneWay = 1;
// Reported wrong messages are capped: one bad run must not flood the log.
constexpr uint64_t kMaxWrongLogged = 5;

// The first error of a side wins; later ones are usually its consequences
// (the other thread sees the channel shut down).
class ErrorSlot {
  public:
    void set(SideResult *r, dp_status_t status, std::string message) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (r->status != DP_OK) return;
        r->status = status;
        r->error = std::move(message);
    }

  private:
    std::mutex mutex_;
};

void pin(const std::vector<int> &cpus, size_t index, const char *role) {
    if (cpus.empty()) return;
    int cpu = cpus[index % cpus.size()];
    if (affinity::pin_current_thread(cpu) != DP_OK)
        DP_APP_WARN("[{}] could not pin a thread to CPU {}", role, cpu);
}

std::string describe_status(dp_status_t s, const char *what) {
    return fmt::format("{} failed: {}", what, dp_strerror(s));
}

class Side {
  public:
    Side(ch::Transport &t, const Plan &plan, Role role, const std::vector<int> &cpus)
        : t_(t), plan_(plan), role_(role), cpus_(cpus), name_(role_name(role)) {
        r_.role = name_;
        r_.transport = t.kind();
        r_.peer = t.peer();
        r_.buffer_bytes = t.buffer_bytes();
        r_.max_message = t.max_message();
        r_.msg_size = plan.msg_size;
        r_.connected = true;
        trace_ = log::app().should_log(spdlog::level::trace);
    }

    SideResult run();

  private:
    bool handshake();
    bool start_barrier();
    void stream_send();
    void stream_recv();
    void ping();
    void pong();
    void fail(dp_status_t s, std::string message) {
        errors_.set(&r_, s, std::move(message));
        t_.shutdown();  // unblocks this side's other thread
    }
    void send_error(const std::string &reason) {
        t_.send(MsgType::kError, reason.data(), reason.size(), plan_.timeout_ns);
    }
    bool check_data(const uint8_t *data, size_t length, uint64_t seq);
    void finish_verdict();

    ch::Transport &t_;
    const Plan &plan_;
    Role role_;
    const std::vector<int> &cpus_;
    const char *name_;
    SideResult r_;
    ErrorSlot errors_;
    // The start barrier (stream mode): the receiver thread is up and pinned
    // (ready), the peer's threads are too (go, after START both ways).
    std::latch ready_{1};
    std::atomic<int> go_{0};  // 1: start the clock; -1: the barrier failed, stop
    bool trace_ = false;
    std::unique_ptr<Payload> expect_;  // the peer's messages
};

bool Side::handshake() {
    ch::Hello mine;
    mine.mode = uint8_t(plan_.mode);
    mine.flags = plan_.one_way ? kFlagOneWay : 0;
    mine.max_message = uint32_t(t_.max_message());
    mine.msg_size = plan_.msg_size;
    mine.num_msgs = plan_.num_msgs;
    ch::Hello peer;
    std::string peer_error;
    dp_status_t s = ch::exchange_hello(t_, mine, plan_.timeout_ns, &peer, &peer_error);
    if (s != DP_OK) {
        fail(s, peer_error.empty() ? describe_status(s, "HELLO exchange")
                                   : "the peer refused: " + peer_error);
        return false;
    }
    r_.peer_planned = int64_t(peer.num_msgs);
    r_.peer_msg_size = peer.msg_size;
    const bool peer_one_way = peer.flags & kFlagOneWay;
    std::string problem;
    dp_status_t code = DP_ERR_MISMATCH;
    if (peer.mode != mine.mode || peer_one_way != plan_.one_way) {
        problem =
            fmt::format("this side runs --mode {}{}, the peer --mode {}{}", mode_name(plan_.mode),
                        plan_.one_way ? " --one-way" : "", peer.mode == 0 ? "stream" : "pingpong",
                        peer_one_way ? " --one-way" : "");
    } else if (peer.msg_size > t_.max_message()) {
        problem = fmt::format(
            "the peer sends {}-byte messages, above this side's limit of {} "
            "bytes",
            peer.msg_size, t_.max_message());
        code = DP_ERR_TOO_LARGE;
    } else if (plan_.msg_size > peer.max_message) {
        problem = fmt::format(
            "this side sends {}-byte messages, above the peer's limit of {} "
            "bytes",
            plan_.msg_size, peer.max_message);
        code = DP_ERR_TOO_LARGE;
    }
    if (!problem.empty()) {
        send_error(problem);
        fail(code, problem);
        return false;
    }
    DP_APP_INFO(
        "[{}] connection established: {} {} (buffer {} bytes, max message {} "
        "bytes)",
        name_, r_.transport, r_.peer, r_.buffer_bytes, r_.max_message);
    if (plan_.mode == Mode::kStream && r_.expected > 0) {
        // As in DOCA's secure-channel sample, a side's -n caps what it
        // receives: it counts min(its -n, the peer's) messages and reads
        // what the peer sends beyond that without counting it (never
        // leaving the sender blocked on a full channel).
        r_.expected = std::min(r_.expected, peer.num_msgs);
        if (peer.num_msgs > plan_.num_msgs)
            DP_APP_WARN("[{}] message counts differ: this side -n {}, the peer -n {}: this side "
                        "receives {} (its -n caps what it receives) and drops the other {}",
                        name_, plan_.num_msgs, peer.num_msgs, plan_.num_msgs,
                        peer.num_msgs - plan_.num_msgs);
        else if (peer.num_msgs < plan_.num_msgs)
            DP_APP_WARN("[{}] message counts differ: this side -n {}, the peer -n {}: this side "
                        "receives the peer's {}",
                        name_, plan_.num_msgs, peer.num_msgs, peer.num_msgs);
    } else if (peer.num_msgs != plan_.num_msgs) {
        DP_APP_WARN("[{}] message counts differ: this side -n {}, the peer -n {}", name_,
                    plan_.num_msgs, peer.num_msgs);
    }
    if (peer.msg_size != plan_.msg_size && plan_.mode == Mode::kStream)
        DP_APP_WARN("[{}] message sizes differ: this side sends {} bytes, the peer {}", name_,
                    plan_.msg_size, peer.msg_size);
    expect_ =
        std::make_unique<Payload>(plan_.mode == Mode::kStream ? peer.msg_size : plan_.msg_size);
    return true;
}

bool Side::check_data(const uint8_t *data, size_t length, uint64_t seq) {
    if (!plan_.verify) return true;
    if (expect_->matches(data, length, seq)) return true;
    if (++r_.wrong <= kMaxWrongLogged)
        DP_APP_ERROR("[{}] message {} is wrong: {} bytes (expected {}){}", name_, seq, length,
                     expect_->size(), length == expect_->size() ? ", content differs" : "");
    return false;
}

// Both sides' threads are up and pinned before either clock starts: each
// side sends START once its own are, and starts when the peer's START is in.
// Without it, a count of one message timed the peer's thread start and its
// migration to its CPU (1.4 ms), not the channel.
bool Side::start_barrier() {
    uint8_t word[8];
    ch::put_u64(word, 0);
    dp_status_t s = t_.send(MsgType::kStart, word, sizeof(word), plan_.timeout_ns);
    MsgType type = MsgType::kInvalid;
    size_t length = 0;
    std::vector<uint8_t> buffer(t_.max_message());
    if (s == DP_OK) s = t_.recv(&type, buffer.data(), buffer.size(), &length, plan_.timeout_ns);
    if (s == DP_OK && type == MsgType::kStart) {
        DP_APP_INFO("[{}] start barrier passed: both sides' threads are ready", name_);
        return true;
    }
    if (s != DP_OK) fail(s, describe_status(s, "the start barrier"));
    else if (type == MsgType::kError)
        fail(DP_ERR_AGENT_LOST, "the peer gave up: " +
                                    std::string(reinterpret_cast<char *>(buffer.data()), length));
    else
        fail(DP_ERR_INVALID, fmt::format("{} from the peer where START was due (a deputy older "
                                         "than this one?)",
                                         ch::msg_type_name(type)));
    return false;
}

void Side::stream_send() {
    pin(cpus_, 0, name_);
    Payload payload(plan_.msg_size);
    ready_.wait();
    const bool started = start_barrier();
    go_.store(started ? 1 : -1, std::memory_order_release);
    go_.notify_one();
    if (!started) return;
    const uint64_t cpu0 = timing::thread_cpu_ns();
    r_.send_start_ns = timing::now_ns();
    DP_APP_INFO("[{}] SEND START TIME: {} ns ({} messages of {} bytes)", name_,
                r_.send_start_ns, r_.planned_send, plan_.msg_size);
    dp_status_t s = DP_OK;
    for (uint64_t i = 0; i < r_.planned_send; ++i) {
        s = t_.send(MsgType::kData, payload.message(i), plan_.msg_size, plan_.timeout_ns);
        if (s != DP_OK) break;
        ++r_.sent;
        if (trace_) DP_APP_TRACE("[{}] message sent: {}", name_, i);
    }
    r_.send_end_ns = timing::now_ns();
    DP_APP_INFO("[{}] SEND END TIME: {} ns", name_, r_.send_end_ns);
    if (s == DP_OK) {
        uint8_t end[ch::kEndBytes];
        ch::put_u64(end, r_.sent);
        s = t_.send(MsgType::kEnd, end, sizeof(end), plan_.timeout_ns);
    }
    r_.send_cpu_ns = timing::thread_cpu_ns() - cpu0;
    if (s != DP_OK)
        fail(s, fmt::format("sending message {} of {}: {}", r_.sent + 1, r_.planned_send,
                            dp_strerror(s)));
    DP_APP_INFO("[{}] Send thread exiting, total amount of messages sent successfully: {}",
                name_, r_.sent);
}

void Side::stream_recv() {
    pin(cpus_, 1, name_);
    std::vector<uint8_t> buffer(t_.max_message());
    ready_.count_down();
    go_.wait(0, std::memory_order_acquire);
    if (go_.load(std::memory_order_acquire) < 0) return;
    const uint64_t cpu0 = timing::thread_cpu_ns();
    r_.recv_start_ns = timing::now_ns();
    DP_APP_INFO("[{}] RECV START TIME: {} ns", name_, r_.recv_start_ns);
    uint64_t last_counted_ns = 0;
    for (;;) {
        MsgType type;
        size_t length = 0;
        dp_status_t s = t_.recv(&type, buffer.data(), buffer.size(), &length, plan_.timeout_ns);
        if (s != DP_OK) {
            fail(s, s == DP_ERR_TIMEOUT
                        ? fmt::format("no message from the peer for {} s after {} received "
                                      "(--timeout)",
                                      plan_.timeout_ns / 1e9, r_.received)
                        : fmt::format("receiving after {} message(s): {}", r_.received,
                                      dp_strerror(s)));
            break;
        }
        if (type == MsgType::kData) {
            if (r_.received == r_.expected) {  // beyond this side's -n: read, not counted
                if (r_.dropped++ == 0) last_counted_ns = timing::now_ns();
                continue;
            }
            if (r_.received == 0) r_.recv_first_ns = timing::now_ns();
            check_data(buffer.data(), length, r_.received);
            if (trace_) DP_APP_TRACE("[{}] message received: {}", name_, r_.received);
            ++r_.received;
        } else if (type == MsgType::kEnd && length == ch::kEndBytes) {
            r_.peer_sent = int64_t(ch::get_u64(buffer.data()));
            break;
        } else if (type == MsgType::kError) {
            fail(DP_ERR_AGENT_LOST,
                 "the peer gave up: " +
                     std::string(reinterpret_cast<char *>(buffer.data()), length));
            break;
        } else {
            fail(DP_ERR_INVALID, fmt::format("unexpected {} ({} bytes) from the peer",
                                             ch::msg_type_name(type), length));
            break;
        }
    }
    // The timed window ends with the last message counted.
    r_.recv_end_ns = r_.dropped > 0 ? last_counted_ns : timing::now_ns();
    r_.recv_cpu_ns = timing::thread_cpu_ns() - cpu0;
    DP_APP_INFO("[{}] RECV END TIME: {} ns", name_, r_.recv_end_ns);
    DP_APP_INFO(
        "[{}] Receive thread exiting, total amount of messages received "
        "successfully: {}",
        name_, r_.received);
}

void Side::ping() {
    pin(cpus_, 0, name_);
    Payload payload(plan_.msg_size);
    std::vector<uint8_t> buffer(t_.max_message());
    std::vector<double> samples;
    samples.reserve(r_.planned_send);
    const uint64_t cpu0 = timing::thread_cpu_ns();
    r_.send_start_ns = r_.recv_start_ns = timing::now_ns();
    DP_APP_INFO("[{}] SEND START TIME: {} ns ({} round trips of {} bytes)", name_,
                r_.send_start_ns, r_.planned_send, plan_.msg_size);
    for (uint64_t i = 0; i < r_.planned_send; ++i) {
        const uint64_t t0 = timing::now_ns();
        dp_status_t s =
            t_.send(MsgType::kData, payload.message(i), plan_.msg_size, plan_.timeout_ns);
        if (s != DP_OK) {
            fail(s, fmt::format("sending ping {}: {}", i, dp_strerror(s)));
            break;
        }
        ++r_.sent;
        MsgType type;
        size_t length = 0;
        s = t_.recv(&type, buffer.data(), buffer.size(), &length, plan_.timeout_ns);
        const uint64_t t1 = timing::now_ns();
        if (s != DP_OK || type != MsgType::kData) {
            fail(s != DP_OK ? s : DP_ERR_INVALID,
                 s != DP_OK ? fmt::format("waiting for pong {}: {}", i, dp_strerror(s))
                            : fmt::format("expected pong {}, got {}", i, ch::msg_type_name(type)));
            break;
        }
        if (r_.received == 0) r_.recv_first_ns = t1;
        check_data(buffer.data(), length, i);
        ++r_.received;
        if (i >= plan_.warmup) samples.push_back(double(t1 - t0) / 2);
        if (trace_) DP_APP_TRACE("[{}] round trip {}: {} ns", name_, i, t1 - t0);
    }
    r_.send_end_ns = r_.recv_end_ns = timing::now_ns();
    DP_APP_INFO("[{}] SEND END TIME: {} ns", name_, r_.send_end_ns);
    if (r_.status == DP_OK) {
        uint8_t end[ch::kEndBytes];
        ch::put_u64(end, r_.sent);
        MsgType type;
        size_t length = 0;
        dp_status_t s = t_.send(MsgType::kEnd, end, sizeof(end), plan_.timeout_ns);
        if (s == DP_OK) s = t_.recv(&type, buffer.data(), buffer.size(), &length, plan_.timeout_ns);
        if (s == DP_OK && type == MsgType::kEnd && length == ch::kEndBytes)
            r_.peer_sent = int64_t(ch::get_u64(buffer.data()));
        else
            fail(s != DP_OK ? s : DP_ERR_INVALID, "closing: no END from the peer");
    }
    r_.send_cpu_ns = timing::thread_cpu_ns() - cpu0;
    if (!samples.empty()) {
        Latency &l = r_.latency;
        l.samples = samples.size();
        l.min = *std::min_element(samples.begin(), samples.end());
        l.max = *std::max_element(samples.begin(), samples.end());
        double sum = 0;
        for (double v : samples) sum += v;
        l.avg = sum / double(samples.size());
        l.p50 = timing::percentile(samples, 0.50);
        l.p99 = timing::percentile(samples, 0.99);
    }
}

void Side::pong() {
    pin(cpus_, 0, name_);
    std::vector<uint8_t> buffer(t_.max_message());
    const uint64_t cpu0 = timing::thread_cpu_ns();
    r_.send_start_ns = r_.recv_start_ns = timing::now_ns();
    DP_APP_INFO("[{}] RECV START TIME: {} ns (echoing)", name_, r_.recv_start_ns);
    for (;;) {
        MsgType type;
        size_t length = 0;
        dp_status_t s = t_.recv(&type, buffer.data(), buffer.size(), &length, plan_.timeout_ns);
        if (s != DP_OK) {
            fail(s, fmt::format("waiting for ping {}: {}", r_.received, dp_strerror(s)));
            break;
        }
        if (type == MsgType::kEnd && length == ch::kEndBytes) {
            r_.peer_sent = int64_t(ch::get_u64(buffer.data()));
            uint8_t end[ch::kEndBytes];
            ch::put_u64(end, r_.sent);
            s = t_.send(MsgType::kEnd, end, sizeof(end), plan_.timeout_ns);
            if (s != DP_OK) fail(s, describe_status(s, "sending END"));
            break;
        }
        if (type != MsgType::kData) {
            fail(DP_ERR_INVALID, fmt::format("expected a ping, got {}", ch::msg_type_name(type)));
            break;
        }
        if (r_.received == 0) r_.recv_first_ns = timing::now_ns();
        check_data(buffer.data(), length, r_.received);
        ++r_.received;
        s = t_.send(MsgType::kData, buffer.data(), length, plan_.timeout_ns);
        if (s != DP_OK) {
            fail(s, fmt::format("sending pong {}: {}", r_.received - 1, dp_strerror(s)));
            break;
        }
        ++r_.sent;
        if (trace_) DP_APP_TRACE("[{}] message echoed: {}", name_, r_.received - 1);
    }
    r_.send_end_ns = r_.recv_end_ns = timing::now_ns();
    r_.recv_cpu_ns = timing::thread_cpu_ns() - cpu0;
    // The responder's plan is to echo every ping that comes; what it expected
    // to receive (its -n) is checked on the receive side.
    r_.planned_send = r_.received;
    DP_APP_INFO("[{}] RECV END TIME: {} ns", name_, r_.recv_end_ns);
}

void Side::finish_verdict() {
    std::vector<std::string> issues;
    if (r_.sent != r_.planned_send)
        issues.push_back(fmt::format("sent {} of {}", r_.sent, r_.planned_send));
    if (r_.received != r_.expected)
        issues.push_back(fmt::format("received {}, expected {}", r_.received, r_.expected));
    if (r_.peer_sent >= 0 && uint64_t(r_.peer_sent) != r_.received + r_.dropped)
        issues.push_back(fmt::format("the peer sent {} but {} arrived", r_.peer_sent,
                                     r_.received + r_.dropped));
    if (plan_.mode == Mode::kPingpong && role_ == Role::kConnect && r_.peer_planned >= 0 &&
        uint64_t(r_.peer_planned) != plan_.num_msgs)
        issues.push_back(fmt::format("the peer expected {} pings", r_.peer_planned));
    if (r_.wrong > 0) issues.push_back(fmt::format("{} message(s) with wrong bytes", r_.wrong));
    r_.verdict = "OK";
    if (!issues.empty()) {
        r_.verdict = "MISMATCH: ";
        for (size_t i = 0; i < issues.size(); ++i) r_.verdict += (i ? "; " : "") + issues[i];
    }
}

SideResult Side::run() {
    const bool one_way = plan_.mode == Mode::kStream && plan_.one_way;
    r_.planned_send = one_way && role_ == Role::kListen ? 0 : plan_.num_msgs;
    r_.expected = one_way && role_ == Role::kConnect ? 0 : plan_.num_msgs;
    if (handshake()) {
        if (plan_.mode == Mode::kStream) {
            std::thread receiver([this] { stream_recv(); });
            stream_send();
            receiver.join();
        } else if (role_ == Role::kConnect) {
            ping();
        } else {
            pong();
        }
    }
    finish_verdict();
    if (r_.status != DP_OK)
        DP_APP_ERROR("[{}] {} ({})", name_, r_.error, dp_status_name(r_.status));
    return r_;
}

}  // namespace

SideResult run_on(ch::Transport &transport, const Plan &plan, Role role,
                  const std::vector<int> &cpus) {
    Side side(transport, plan, role, cpus);
    return side.run();
}

SideResult run_side(const Plan &plan, Role role, ch::EndpointListener *listener,
                    const std::vector<int> &cpus) {
    SideResult failed;
    failed.role = role_name(role);
    failed.transport = ch::transport_kind_name(plan.endpoint.kind);
    failed.peer = plan.endpoint.address;
    failed.msg_size = plan.msg_size;
    failed.verdict = "no connection";
    std::unique_ptr<ch::Transport> transport;
    dp_status_t s;
    if (role == Role::kListen) {
        std::unique_ptr<ch::EndpointListener> own;
        if (listener == nullptr) {
            s = ch::EndpointListener::open(plan.endpoint, &own);
            if (s != DP_OK) {
                failed.status = s;
                failed.error = "cannot listen on " + plan.endpoint.address;
                DP_APP_ERROR("[listen] {} ({})", failed.error, dp_status_name(s));
                return failed;
            }
            listener = own.get();
        }
        DP_APP_INFO("[listen] Started listening on {} {}, waiting for a connection",
                    failed.transport, listener->address());
        s = listener->accept(plan.timeout_ns, &transport);
    } else {
        s = ch::connect_endpoint(plan.endpoint, plan.timeout_ns, &transport);
    }
    if (s != DP_OK) {
        failed.status = s;
        failed.error =
            s == DP_ERR_TIMEOUT
                ? fmt::format("no peer connected within {} s (--timeout)", plan.timeout_ns / 1e9)
                : fmt::format("{} {}: {}", role == Role::kListen ? "accepting on" : "connecting to",
                              plan.endpoint.address, dp_strerror(s));
        DP_APP_ERROR("[{}] {} ({})", failed.role, failed.error, dp_status_name(s));
        return failed;
    }
    return run_on(*transport, plan, role, cpus);
}

}  // namespace deputy::bench::channel
