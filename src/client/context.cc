#include "client/context.h"

#include <poll.h>
#include <sodium.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "channel/agent_address.h"
#include "fabric/exposed_memory.h"
#include "channel/key_file.h"
#include "channel/secure.h"
#include "channel/socket_io.h"
#include "channel/transport/tcp/transport.h"
#include "channel/transport/uds/transport.h"
#include "client/job_secret.h"
#include "client/shared_heap.h"
#include "common/check.h"
#include "common/log.h"
#include "common/private_window.h"
#include "common/timing.h"
#include "mover/queue_group.h"
#include "mover/wait.h"

namespace deputy::client {
namespace {

namespace control = channel::control;
using channel::MsgType;

uint64_t coarse_now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

// The agent answers DP_ERR_RETRY when one of its bounds is full for a
// moment (clients attaching, memory probes running: agent/memory_probe.h)
// and nothing was done. A job's ranks starting together meet it, so the
// request is made again after a growing pause, for at most budget_ns.
template <class Attempt>
dp_status_t while_busy(int64_t budget_ns, const char *what, Attempt attempt) {
    const uint64_t deadline = coarse_now_ns() + uint64_t(budget_ns);
    int64_t pause_ns = 100'000;
    for (;;) {
        const dp_status_t s = attempt();
        if (s != DP_ERR_RETRY) return s;
        if (coarse_now_ns() >= deadline)
            DP_FAIL(DP_ERR_RETRY, "{}: the agent stayed busy for {} ms; try again later", what,
                    budget_ns / 1'000'000);
        const timespec pause{0, long(pause_ns)};
        nanosleep(&pause, nullptr);
        pause_ns = std::min<int64_t>(pause_ns * 2, 20'000'000);
    }
}

// The REPLY a request was answered with; DP_ERR_INTERNAL (logged) for any
// other answer or one that does not decode.
dp_status_t decode_reply(MsgType type, const std::vector<uint8_t> &answer, const char *what,
                         control::Reply *reply) {
    std::string error;
    if (type != MsgType::kReply ||
        control::decode(answer.data(), answer.size(), reply, &error) != DP_OK)
        DP_FAIL(DP_ERR_INTERNAL, "{}: unexpected answer {} {}", what,
                channel::msg_type_name(type), error);
    return DP_OK;
}

const char *env_or(const char *name, const char *fallback) {
    const char *v = std::getenv(name);
    return v && *v ? v : fallback;
}

}  // namespace

dp_status_t options_from_config(const dp_config_t *config, ClientOptions *out) {
    dp_config_t defaults = DP_CONFIG_INITIALIZER;
    const dp_config_t &c = config ? *config : defaults;
    // Structs of callers built before job_secret existed are accepted.
    constexpr size_t kOldestSize = offsetof(dp_config_t, job_secret);
    if (c.size < kOldestSize || c.size > sizeof(dp_config_t))
        DP_FAIL(DP_ERR_INVALID,
                "dp_init: config.size {} (expected {}..{}; use DP_CONFIG_INITIALIZER)", c.size,
                kOldestSize, sizeof(dp_config_t));
    out->address = channel::resolve_agent_address(c.agent ? c.agent : "");
    const char *token = c.token ? c.token : env_or("DEPUTY_TOKEN", "");
    out->token = token;
    if (out->token.size() > control::kMaxTokenBytes)
        DP_FAIL(DP_ERR_TOO_LARGE, "dp_init: token of {} bytes (at most {})", out->token.size(),
                control::kMaxTokenBytes);
    // Older callers' structs end before job_secret: read it only when there.
    const bool has_secret = c.size >= offsetof(dp_config_t, job_secret) + sizeof(c.job_secret);
    // Read (and taken out of the environment) whether or not the config
    // gives one: no process of the user finds it in /proc/<pid>/environ.
    std::string from_environment;
    DP_CHECK(job_secret_from_environment(&from_environment));
    out->job_secret = has_secret && c.job_secret ? std::string(c.job_secret) : from_environment;
    if (out->job_secret.size() > control::kMaxTokenBytes)
        DP_FAIL(DP_ERR_TOO_LARGE, "dp_init: job secret of {} bytes (at most {})",
                out->job_secret.size(), control::kMaxTokenBytes);
    out->pool_bytes = c.pool_bytes;
    out->ring_size = c.ring_size;
    std::string memory = env_or("DEPUTY_MEMORY", "");
    if (c.memory_mode > DP_MEMORY_RDMA)
        DP_FAIL(DP_ERR_INVALID, "dp_init: config.memory_mode {} (0 direct, 1 staged, 2 rdma)",
                c.memory_mode);
    out->memory_mode = dp_memory_mode_t(c.memory_mode);
    if (memory == "staged") out->memory_mode = DP_MEMORY_STAGED;
    else if (memory == "rdma") out->memory_mode = DP_MEMORY_RDMA;
    else if (!memory.empty() && memory != "direct" && memory != "mapped")
        DP_FAIL(DP_ERR_INVALID, "DEPUTY_MEMORY={}: expected mapped, direct, staged or rdma",
                memory);
    if (c.wq_mode > DP_WQ_SHARED)
        DP_FAIL(DP_ERR_INVALID, "dp_init: config.wq_mode {} (0 dedicated, 1 shared)", c.wq_mode);
    out->wq_mode = dp_wq_mode_t(c.wq_mode);
    if (c.wait_mode != DP_WAIT_DEFAULT && c.wait_mode > DP_WAIT_BLOCK)
        DP_FAIL(DP_ERR_INVALID, "dp_init: config.wait_mode {} (0..3 or DP_WAIT_DEFAULT)",
                c.wait_mode);
    out->adaptive_wait = c.wait_mode == DP_WAIT_DEFAULT;
    out->wait_mode = c.wait_mode == DP_WAIT_DEFAULT ? DP_WAIT_BLOCK : dp_wait_mode_t(c.wait_mode);
    if (c.size >= offsetof(dp_config_t, cpu_shared) + sizeof(c.cpu_shared) && c.cpu_shared)
        out->adaptive_poll_ns = 0;
    const std::string rank_execution = env_or("DEPUTY_RANK_EXECUTION", "on");
    if (rank_execution != "on" && rank_execution != "off")
        DP_FAIL(DP_ERR_INVALID, "DEPUTY_RANK_EXECUTION={}: expected on or off", rank_execution);
    out->rank_execution = rank_execution == "on";
    if (out->address.rfind("tcp://", 0) == 0) {
        out->remote = true;
        out->insecure_tcp = std::string(env_or("DEPUTY_INSECURE_TCP", "")) == "1";
        // Older callers' structs end before key_file: read it only when there.
        const bool has_key = c.size >= offsetof(dp_config_t, key_file) + sizeof(c.key_file);
        out->key_file = has_key && c.key_file ? c.key_file : env_or("DEPUTY_KEY", "");
        if (out->key_file.empty() && !out->insecure_tcp)
            DP_FAIL(DP_ERR_INVALID,
                    "dp_init: the agent at {} is remote: DEPUTY_KEY=FILE (or "
                    "dp_config_t.key_file) names the secure session's key (the agent's --key), "
                    "or DEPUTY_INSECURE_TCP=1 goes in clear",
                    out->address);
        // Nothing of this process is mapped in the agent's reach: every
        // request carries its bytes (or, rdma, exposes them by RMA), and no
        // team member runs another's operation. (So push(), the ring's hot
        // path, is never reached: the mover goes staged, teams through a
        // team proxy.)
        if (out->memory_mode != DP_MEMORY_RDMA) out->memory_mode = DP_MEMORY_STAGED;
        out->rank_execution = false;
        const bool has_provider =
            c.size >= offsetof(dp_config_t, fabric_provider) + sizeof(c.fabric_provider);
        out->fabric_provider = has_provider && c.fabric_provider
                                   ? c.fabric_provider
                                   : env_or("DEPUTY_FABRIC_PROVIDER", "tcp");
        if (out->fabric_provider.empty() ||
            out->fabric_provider.size() > control::kMaxProviderName)
            DP_FAIL(DP_ERR_INVALID, "dp_init: fabric provider '{}' (1..{} characters)",
                    out->fabric_provider, control::kMaxProviderName);
    } else if (out->memory_mode == DP_MEMORY_RDMA) {
        DP_FAIL(DP_ERR_INVALID,
                "dp_init: memory mode rdma is for an agent on another host (DEPUTY_AGENT="
                "tcp://HOST:PORT); the local agent at {} reads this process's memory "
                "directly (mode direct) or staged",
                out->address);
    }
    out->lost_timeout_ns = int64_t(c.lost_timeout_ms ? c.lost_timeout_ms : 1000) * 1'000'000;
    out->connect_timeout_ns = int64_t(c.connect_timeout_ms ? c.connect_timeout_ms : 1000) * 1'000'000;
    return DP_OK;
}

dp_status_t Context::open(const ClientOptions &options, std::unique_ptr<Context> *out) {
    if (sodium_init() < 0) DP_FAIL(DP_ERR_INTERNAL, "dp_init: libsodium failed to initialise");
    std::unique_ptr<Context> ctx(new Context());
    ctx->options_ = options;
    DP_CHECK(while_busy(ctx->busy_budget_ns(), "dp_init", [&] { return ctx->attach(); }));
    *out = std::move(ctx);
    return DP_OK;
}

Context::~Context() = default;  // closing the socket detaches; the agent frees the rest

dp_status_t Context::attach() {
    // The ATTACH exchange runs on this thread alone, on the bare socket; the
    // control channel takes it over once attached.
    UniqueFd socket;
    control::Attach hello;
    if (options_.remote) {
        DP_CHECK(connect_remote(&socket, &relay_));
    } else {
        DP_CHECK(channel::uds::connect_fd(options_.address, options_.connect_timeout_ns, &socket));
        channel::sock::PeerCredentials creds;
        DP_CHECK(channel::sock::peer_credentials(socket.get(), &creds));
        agent_pid_ = creds.pid;
        // Where Yama restricts ptrace (scope 1), the agent's cross-memory
        // access (reading the identity proof now, direct memory later)
        // needs this process's consent. Without Yama the call fails: fine.
        prctl(PR_SET_PTRACER, agent_pid_, 0, 0, 0);
        randombytes_buf(identity_proof_.data(), identity_proof_.size());
        hello.proof_addr = reinterpret_cast<uint64_t>(identity_proof_.data());
        hello.proof = identity_proof_;
    }
    hello.ring_size = options_.ring_size;
    hello.pool_bytes = options_.pool_bytes;
    hello.token = options_.token;
    std::vector<uint8_t> payload;
    control::encode(hello, &payload);
    // The agent faults the pool in before it answers (about 1 s per GiB on a
    // small VM, off its service thread): give a large pool the time that takes.
    const int64_t timeout = std::max<int64_t>(options_.lost_timeout_ns, 1'000'000'000) +
                            int64_t(options_.pool_bytes >> 30) * 2'000'000'000;
    // An agent that refuses (another uid) answers and closes at once, so
    // our ATTACH may meet a closed socket: read its answer all the same.
    const dp_status_t sent = control::send_message(socket.get(), MsgType::kAttach, payload,
                                                   nullptr, 0, timeout, "dp_init");
    MsgType type;
    std::vector<uint8_t> answer;
    UniqueFd fds[2];
    size_t nfds = 0;
    // From the moment the segment's fd is in our fd table until it is
    // sealed and closed, no other process may open it through
    // /proc/<pid>/fd (a writable mapping made then would outlive the seal).
    std::optional<PrivateWindow> window(std::in_place);
    dp_status_t s = control::recv_message(socket.get(), control::kMaxControlMessage, &type,
                                          &answer, fds, 2, &nfds, timeout, "dp_init");
    if (sent != DP_OK && (s != DP_OK || type != MsgType::kReply)) return sent;
    if (s == DP_ERR_TIMEOUT)
        DP_FAIL(DP_ERR_NO_AGENT, "dp_init: the agent at {} did not answer in {} ms",
                options_.address, timeout / 1'000'000);
    DP_CHECK(s);
    std::string error;
    if (type == MsgType::kReply) {
        control::Reply reply;
        if (control::decode(answer.data(), answer.size(), &reply, &error) != DP_OK)
            DP_FAIL(DP_ERR_INTERNAL, "dp_init: {}", error);
        if (reply.status == DP_ERR_RETRY) {  // asked again (while_busy)
            DP_LOG_DEBUG("dp_init: the agent at {} is busy: {}", options_.address, reply.reason);
            return DP_ERR_RETRY;
        }
        DP_FAIL(reply.status < 0 ? reply.status : DP_ERR_INTERNAL,
                "dp_init: the agent at {} refused: {} ({})", options_.address, reply.reason,
                dp_status_name(reply.status));
    }
    if (options_.remote && type == MsgType::kKeyExchange)
        DP_FAIL(DP_ERR_DENIED,
                "dp_init: the agent at {} speaks the secure session: give its key with "
                "DEPUTY_KEY=FILE, not DEPUTY_INSECURE_TCP=1",
                options_.address);
    const size_t want_fds = options_.remote ? 0 : 2;
    if (type != MsgType::kAttached || nfds != want_fds)
        DP_FAIL(DP_ERR_INTERNAL, "dp_init: expected ATTACHED with {} fds, got {} with {}",
                want_fds, channel::msg_type_name(type), nfds);
    if (control::decode(answer.data(), answer.size(), &attached_, &error) != DP_OK)
        DP_FAIL(DP_ERR_INTERNAL, "dp_init: {}", error);
    if (options_.remote) {
        // The agent's pid names a process of another host: for logs only.
        agent_pid_ = pid_t(attached_.agent_pid);
        window.reset();
        // dp_malloc's pool is this process's own memory here (nothing is
        // shared across hosts): buffers in it travel staged like any other.
        const uint64_t pool = options_.pool_bytes ? options_.pool_bytes : kRemotePoolBytes;
        DP_CHECK(Segment::create("deputy-remote-pool", pool, &segment_, Segment::Pages::lazy));
        pool_.reset(static_cast<std::byte *>(segment_.data()), segment_.size());
        start_control(std::move(socket));
        DP_LOG_DEBUG("dp_init: attached to the remote agent at {} as client {} ({})",
                     options_.address, attached_.client_id,
                     options_.insecure_tcp ? "in clear" : "secure session");
        return DP_OK;
    }
    if (attached_.agent_pid != uint64_t(agent_pid_))
        DP_FAIL(DP_ERR_DENIED, "dp_init: the agent says it is pid {}, the kernel says {}",
                attached_.agent_pid, agent_pid_);
    // Lazily: dp_malloc faults in what it hands out (pool_allocator.cc).
    DP_CHECK(Segment::map(std::move(fds[0]), attached_.segment_bytes, &segment_,
                          Segment::Pages::lazy));
    // The agent and we have it mapped: nobody else ever maps it writable,
    // through the read-only views teammates get or any fd of it. Then the
    // fd goes: this process holds the mapping only, which no other process
    // can open (the agent's fd table is not theirs to read either).
    if (const dp_status_t sealed = segment_.close_to_new_writers(); sealed != DP_OK)
        DP_LOG_WARN("dp_init: the segment stays open to new writers ({}): a process of this "
                    "user that can read the agent's fd table could map it writable",
                    sealed == DP_ERR_UNSUPPORTED ? "the kernel has no F_SEAL_FUTURE_WRITE"
                                                 : std::strerror(errno));
    segment_.close_fd();
    window.reset();
    doorbell_ = std::move(fds[1]);
    const uint64_t size = segment_.size();
    if (attached_.ring_offset < channel::kClientHeaderBytes ||
        attached_.ring_offset + mover::WorkQueue::bytes_for(attached_.ring_size) > size ||
        attached_.pool_offset > size || attached_.pool_bytes > size - attached_.pool_offset)
        DP_FAIL(DP_ERR_INTERNAL, "dp_init: the agent's segment layout does not fit its {} bytes",
                size);
    header_ = reinterpret_cast<channel::ClientSegmentHeader *>(segment_.data());
    if (header_->magic != channel::kClientSegmentMagic)
        DP_FAIL(DP_ERR_INTERNAL, "dp_init: the segment is not a deputy client segment");
    ring_ = mover::WorkQueue(segment_.at(attached_.ring_offset));
    pool_.reset(segment_.at(attached_.pool_offset), attached_.pool_bytes);
    agent_pidfd_.reset(int(syscall(SYS_pidfd_open, agent_pid_, 0)));
    if (!agent_pidfd_)
        DP_LOG_DEBUG("dp_init: pidfd_open({}): {}; falling back to kill(pid, 0)", agent_pid_,
                     std::strerror(errno));
    start_control(std::move(socket));
    control::Register base{reinterpret_cast<uint64_t>(segment_.data()), segment_.size(),
                           control::RegionKind::kSegmentBase};
    payload.clear();
    control::encode(base, &payload);
    DP_CHECK(simple_request(MsgType::kRegister, payload, "dp_init: segment base"));
    if (options_.memory_mode == DP_MEMORY_DIRECT && options_.share_heap) share_heap();
    DP_LOG_DEBUG("dp_init: attached to agent pid {} at {} as client {}: ring {}, pool {} KiB",
                 agent_pid_, options_.address, attached_.client_id, attached_.ring_size,
                 attached_.pool_bytes >> 10);
    return DP_OK;
}

void Context::start_control(UniqueFd socket) {
    ControlChannel::Hooks hooks;
    hooks.check_alive = [this] { return check_alive_now(); };
    hooks.lost = [this](const std::string &why) { mark_lost(why.c_str()); };
    control_.start(std::move(socket), int64_t(check_period_ns()),
                   std::max<int64_t>(options_.lost_timeout_ns, 1'000'000'000), std::move(hooks));
}

dp_status_t Context::connect_remote(UniqueFd *socket,
                                    std::unique_ptr<channel::Relay> *relay) const {
    const std::string where = options_.address.substr(std::string("tcp://").size());
    channel::TransportOptions t;
    t.max_message =
        control::kMaxControlMessage + (options_.insecure_tcp ? 0 : channel::secure::kOverhead);
    UniqueFd fd;
    DP_CHECK(channel::tcp::connect_fd(where, options_.connect_timeout_ns, &fd));
    // A cut link is noticed as a dead agent is: within about the lost timeout.
    DP_CHECK(channel::tcp::bound_silence(fd.get(), options_.lost_timeout_ns));
    std::unique_ptr<channel::Transport> link;
    DP_CHECK(channel::tcp::wrap(std::move(fd), where, t, &link));
    if (options_.insecure_tcp) {
        DP_LOG_WARN("dp_init: talking to the agent at {} IN CLEAR (DEPUTY_INSECURE_TCP=1): "
                    "whoever is on the path reads and may change what it moves",
                    options_.address);
    } else {
        channel::secure::Key key;
        DP_CHECK(channel::secure::load_key_file(options_.key_file, &key));
        std::unique_ptr<channel::Transport> secured;
        DP_CHECK(channel::secure::establish(std::move(link), key,
                                            channel::secure::Role::kInitiator,
                                            options_.connect_timeout_ns, &secured));
        link = std::move(secured);
    }
    return channel::Relay::start(std::move(link), control::kMaxControlMessage, socket, relay);
}

std::shared_ptr<fabric::ExposedMemory> Context::exposed_memory(const std::string &peer_host) {
    std::lock_guard<std::mutex> lock(exposed_mu_);
    if (!exposed_)
        exposed_ = std::make_shared<fabric::ExposedMemory>(options_.fabric_provider, peer_host);
    return exposed_;
}

dp_status_t Context::open_proxy_link(UniqueFd *socket, std::unique_ptr<channel::Relay> *relay,
                                     const char *what) const {
    if (!options_.remote) DP_FAIL(DP_ERR_INTERNAL, "{}: a team proxy serves remote contexts", what);
    DP_CHECK(connect_remote(socket, relay));
    control::Attach hello;
    hello.purpose = control::Purpose::kTeamProxy;
    hello.token = options_.token;
    std::vector<uint8_t> payload;
    control::encode(hello, &payload);
    const int64_t timeout = std::max<int64_t>(options_.lost_timeout_ns, 1'000'000'000);
    DP_CHECK(control::send_message(socket->get(), MsgType::kAttach, payload, nullptr, 0, timeout,
                                   what));
    MsgType type;
    std::vector<uint8_t> answer;
    size_t nfds = 0;
    DP_CHECK(control::recv_message(socket->get(), control::kMaxControlMessage, &type, &answer,
                                   nullptr, 0, &nfds, timeout, what));
    control::Reply reply;
    DP_CHECK(decode_reply(type, answer, what, &reply));
    if (reply.status != DP_OK)
        DP_FAIL(reply.status, "{}: the agent at {} refused a team proxy: {}", what,
                options_.address, reply.reason);
    return DP_OK;
}

// The heap is made now if nothing made it yet, so that what the program
// allocates after dp_init (an MPI program's buffers, after MPI_Init) is in
// memory the agent maps. Not fatal: without it, heap buffers are ordinary
// memory (dp_mem_register, direct mode), as they would be without a heap.
void Context::share_heap() {
    SharedHeap *heap = SharedHeap::instance();
    if (!heap) return;
    std::vector<uint8_t> payload;
    control::encode(control::HeapShare{reinterpret_cast<uint64_t>(heap->base()), heap->size()},
                    &payload);
    heap_shared_ = simple_request(MsgType::kHeapShare, payload, "dp_init: shared heap",
                                  heap->fd()) == DP_OK;
}

bool Context::mapped(const void *p, size_t bytes) const {
    if (options_.remote) return false;  // its pool is its own: the agent reaches nothing
    if (pool_.contains(p, bytes)) return true;
    const SharedHeap *heap = SharedHeap::existing();
    return heap_shared_ && heap && heap->contains(p, bytes);
}

dp_status_t Context::mark_lost(const char *why) {
    if (!lost_.exchange(true)) {
        DP_LOG_ERROR("deputy: lost the agent (pid {}) at {}: {}", agent_pid_, options_.address,
                     why);
        // Threads waiting for answers give up now, not at their timeouts.
        control_.fail();
    }
    return DP_ERR_AGENT_LOST;
}

dp_status_t Context::check_alive_slow(bool force) {
    if (lost_.load(std::memory_order_relaxed)) return DP_ERR_AGENT_LOST;
    const uint64_t now = coarse_now_ns();
    if (!force && now < next_check_ns_.load(std::memory_order_relaxed)) return DP_OK;
    // A quarter of the lost timeout, as waits do: a dead agent is still
    // noticed within the bound, and posts and tests pay the check's system
    // calls once per period rather than on every call of an application whose
    // operations take milliseconds (measured: docs/PERFORMANCE.md).
    next_check_ns_.store(now + check_period_ns(), std::memory_order_relaxed);
    if (header_ && header_->agent_state.load(std::memory_order_acquire) != channel::kAgentServing)
        return mark_lost("it is shutting down");
    if (agent_pidfd_) {
        pollfd p{agent_pidfd_.get(), POLLIN, 0};
        if (poll(&p, 1, 0) > 0) return mark_lost("the agent process exited");
    } else if (!options_.remote && kill(agent_pid_, 0) != 0 && errno == ESRCH) {
        return mark_lost("the agent process exited");
    }
    // The agent closed this connection (it dropped us). Answers waiting
    // to be read do not count: only the peer's shutdown sets POLLRDHUP.
    pollfd p{control_.fd(), POLLRDHUP, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return mark_lost("the agent closed the connection");
    return DP_OK;
}

dp_status_t Context::request(MsgType type, const std::vector<uint8_t> &payload,
                             MsgType *answer_type, std::vector<uint8_t> *answer,
                             int attach_fd) {
    DP_CHECK(check_alive());
    return control_.request(type, payload, answer_type, answer, attach_fd);
}

dp_status_t Context::join_team(const control::TeamJoin &m, control::TeamReady *ready,
                               std::vector<Segment> *segments, int64_t timeout_ns) {
    DP_CHECK(check_alive());
    return control_.join(m, ready, segments, timeout_ns);
}

dp_status_t Context::simple_request(MsgType type, const std::vector<uint8_t> &payload,
                                    const char *what, int attach_fd) {
    return while_busy(busy_budget_ns(), what, [&]() -> dp_status_t {
        MsgType answer_type;
        std::vector<uint8_t> answer;
        DP_CHECK(request(type, payload, &answer_type, &answer, attach_fd));
        control::Reply reply;
        DP_CHECK(decode_reply(answer_type, answer, what, &reply));
        if (reply.status == DP_ERR_RETRY)
            DP_LOG_DEBUG("{}: the agent is busy: {}", what, reply.reason);
        else if (reply.status != DP_OK)
            DP_LOG_ERROR("{}: the agent answered {}: {}", what, dp_status_name(reply.status),
                         reply.reason);
        return reply.status;
    });
}

dp_status_t Context::push(const dp_desc_t &desc, bool retry_when_full) {
    // Only the flag, not the timed check: that one reads the clock (the
    // vDSO's two pages) on every post. A descriptor pushed to an agent that
    // died unnoticed is harmless; the test or wait of its request reports
    // DP_ERR_AGENT_LOST within the bound, and a full ring checks below.
    if (lost_.load(std::memory_order_relaxed)) [[unlikely]]
        return DP_ERR_AGENT_LOST;
    for (;;) {
        const bool queued = options_.wq_mode == DP_WQ_SHARED ? ring_.push_shared(desc, 0)
                                                              : ring_.push_dedicated(desc, 0);
        if (queued) break;
        if (!retry_when_full) return DP_ERR_RETRY;
        ring_doorbell_if_sleeping();
        DP_CHECK(check_alive());
        sched_yield();
    }
    submitted_.fetch_add(1, std::memory_order_relaxed);
    ring_doorbell_if_sleeping();
    return DP_OK;
}

dp_status_t Context::wait_record(dp_completion_t *record, dp_wait_mode_t mode, int64_t timeout_ns,
                                 bool yield_first) {
    const uint64_t start = timing::now_ns();
    // What is left of the caller's timeout, at most `ns` (-1: none).
    const auto within = [&](int64_t ns) {
        if (timeout_ns < 0) return ns;
        return std::max<int64_t>(0, std::min(ns, timeout_ns - int64_t(timing::now_ns() - start)));
    };
    if (mode == DP_WAIT_DEFAULT) {
        mode = options_.wait_mode;
        // Adaptive (context.h): pause, then yield (small collectives), then
        // sleep. Measured (docs/PERFORMANCE.md): ranks spinning with pause
        // on a 2-core machine starve the agent; yielding ones do not.
        if (options_.adaptive_wait &&
            ((options_.adaptive_poll_ns &&
              mover::wait_completion(record, DP_WAIT_PAUSE, within(options_.adaptive_poll_ns)) ==
                  DP_OK) ||
             (yield_first &&
              mover::wait_completion(record, DP_WAIT_YIELD,
                                     within(kAdaptiveYieldNs - options_.adaptive_poll_ns)) ==
                  DP_OK)))
            return DP_OK;
    }
    if (mode > DP_WAIT_BLOCK) return DP_ERR_INVALID;
    // Sleep in slices of a quarter of the lost timeout, checking the agent
    // between them: a record the dead agent will never write cannot hang us.
    const int64_t slice = int64_t(check_period_ns());
    for (;;) {
        const int64_t left = within(slice);
        if (timeout_ns >= 0 && left <= 0) return dp_mover_poll(record) ? DP_OK : DP_ERR_TIMEOUT;
        if (mover::wait_completion(record, mode, left) == DP_OK) return DP_OK;
        DP_CHECK(check_alive_now());
    }
}

void Context::ring_doorbell_if_sleeping() {
    // Pairs with the agent's fence between setting agent_sleeping and its
    // last look at the rings (agent.cc): one of the two sees the other.
    mover::doorbell_fence();
    if (header_->agent_sleeping.load(std::memory_order_relaxed)) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(doorbell_.get(), &one, sizeof(one));
    }
}

}  // namespace deputy::client
