#include "agent/mpi/mpi_internode.h"
#include "channel/coll_post.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "coll/algorithms.h"
#include "coll/selector.h"
#include "coll/transport/mpi/schedule_runner.h"
#include "common/log.h"
#include "common/timing.h"
#include "mover/kernels.h"
#include "mover/names.h"

namespace deputy::agent {
namespace {

using nlohmann::json;

constexpr int kControlTag = 1;
// After this long without progress the node thread stops spinning and
// sleeps in short naps while operations are in flight (two agents and their
// clients share two cores here).
constexpr uint64_t kSpinNs = 200'000;
// The check every operation starts with is an allgather of a fixed-size
// slot per node (fixed: nodes that disagree must still post the same MPI
// call): the header, and a reduction's data when it fits. Such a small
// reduction is then done: every node reduces the gathered parts itself in
// node order, one round instead of two and the same bits on every node.
constexpr size_t kInlineBytes = 2048;
// Schedules run over point-to-point with tags from this base, in slots of
// kTagSpan: at most kTagSlots of a team's schedules are in flight at once
// (the slot is the team's count of schedules posted, the same on every node
// since every node posts a team's steps in the team's order).
constexpr int kTagBase = 64;
constexpr int kTagSpan = 480;
constexpr uint64_t kTagSlots = 64;
static_assert(kTagBase + kTagSpan * int(kTagSlots) <= 32767, "MPI_TAG_UB is at least 32767");
// "auto": MPI's own allreduce below this many bytes per step, the
// selector's schedule (src/coll) at and above it.
constexpr uint64_t kAutoScheduleBytes = 256 << 10;

// MPI operators that reduce with deputy's kernels: MPI's contract is
// inout[i] = in[i] op inout[i].
template <int Dtype, int Op>
void reduce_with_kernels(void *in, void *inout, int *len, MPI_Datatype *) {
    mover::kernels::reduce(inout, in, inout, size_t(*len), dp_dtype_t(Dtype), dp_op_t(Op));
}
using UserFn = void (*)(void *, void *, int *, MPI_Datatype *);
template <size_t... I>
constexpr std::array<UserFn, sizeof...(I)> reduce_functions(std::index_sequence<I...>) {
    return {&reduce_with_kernels<int(I / DP_OP_COUNT), int(I % DP_OP_COUNT)>...};
}
constexpr auto kReduceFns = reduce_functions(std::make_index_sequence<size_t(DP_DTYPE_COUNT) * size_t(DP_OP_COUNT)>());

bool inline_reduction(const InterOp &op) {
    return op.check && op.kind == InterOp::Kind::allreduce &&
           op.elements * mover::dtype_size(op.dtype) <= kInlineBytes;
}

std::string mpi_error(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    return std::string(text, size_t(std::max(len, 0)));
}

// The fields every node must agree on, as bytes for an allgather.
struct Header {
    uint64_t count, root;
    uint8_t opcode, dtype, redop, pad[5];
};
static_assert(sizeof(Header) == 24);

}  // namespace

struct MpiInternode::Command {
    enum class Kind { join, broken, start } kind = Kind::join;
    std::string key;
    uint32_t rank = 0, size = 0, timeout_ms = 0;
    uint64_t uid = 0;
    std::string why;
    InterOp op;
};

struct MpiInternode::Running {
    InterOp op;
    enum class Phase { header, header_wait, data, data_wait } phase = Phase::header;
    MPI_Request request = MPI_REQUEST_NULL;
    Header mine{};
    std::vector<uint8_t> fused;  // the check: every node's slot, then this node's
    std::vector<int> counts, displs, send_counts, send_displs;
    uint64_t deadline_ns = 0;
    std::string algorithm = "mpi-native";
    std::unique_ptr<coll::Schedule> schedule;  // point-to-point allreduce
    std::unique_ptr<coll::mpi::ScheduleRunner> runner;
    std::string error;
    bool all_posted() const { return phase == Phase::data_wait; }
};

struct MpiInternode::TeamComm {
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<uint32_t> nodes;  // ascending node ids
    uint32_t index = 0;           // this node's place in `nodes`
    std::list<Running> ops;
    uint64_t schedules_posted = 0;
    size_t schedules_in_flight = 0;
    bool dead = false;
    std::string dead_reason;
    uint64_t mismatched_sequence = UINT64_MAX;
};

struct MpiInternode::Forming {
    uint32_t size = 0;
    std::vector<uint32_t> node_of_rank;  // UINT32_MAX: not joined
    uint64_t deadline_ns = 0;
    uint32_t timeout_ms = 0;
};

std::unique_ptr<MpiInternode> MpiInternode::create(const Options &options, std::string *error) {
    int provided = 0, size = 0, rank = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        *error = "the MPI library gives less than MPI_THREAD_SERIALIZED";
        return nullptr;
    }
    std::unique_ptr<MpiInternode> self(new MpiInternode());
    self->options_ = options;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    self->node_ = uint32_t(rank);
    self->nodes_ = uint32_t(size);
    // Agents' own traffic on their own communicator: errors come back as
    // codes (a lost node must fail operations, not abort the agent).
    MPI_Comm_dup(MPI_COMM_WORLD, &self->control_);
    MPI_Comm_set_errhandler(self->control_, MPI_ERRORS_RETURN);
    self->event_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!self->event_fd_) {
        *error = fmt::format("eventfd: {}", std::strerror(errno));
        return nullptr;
    }
    self->thread_ = std::thread([p = self.get()] { p->loop(); });
    return self;
}

MpiInternode::~MpiInternode() {
    stop_.store(true);
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void MpiInternode::join(const std::string &key, uint32_t rank, uint32_t size,
                        uint32_t timeout_ms) {
    Command c;
    c.kind = Command::Kind::join;
    c.key = key;
    c.rank = rank;
    c.size = size;
    c.timeout_ms = timeout_ms;
    std::lock_guard<std::mutex> lock(mutex_);
    commands_.push_back(std::move(c));
    wake_.notify_one();
}

void MpiInternode::broken(uint64_t uid, const std::string &why) {
    Command c;
    c.kind = Command::Kind::broken;
    c.uid = uid;
    c.why = why;
    std::lock_guard<std::mutex> lock(mutex_);
    commands_.push_back(std::move(c));
    wake_.notify_one();
}

void MpiInternode::start(InterOp op) {
    Command c;
    c.kind = Command::Kind::start;
    c.op = std::move(op);
    std::lock_guard<std::mutex> lock(mutex_);
    commands_.push_back(std::move(c));
    wake_.notify_one();
}

bool MpiInternode::poll(InternodeEvent *out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (events_.empty()) {
        uint64_t n;
        [[maybe_unused]] ssize_t r = ::read(event_fd_.get(), &n, sizeof n);
        return false;
    }
    *out = std::move(events_.front());
    events_.pop_front();
    return true;
}

std::string MpiInternode::describe() const {
    return fmt::format("node {} of {} (MPI); teams formed {}, inter-node steps done {}, failed {}",
                       node_, nodes_, teams_formed_.load(), ops_done_.load(), ops_failed_.load());
}

void MpiInternode::push_event(InternodeEvent e) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        events_.push_back(std::move(e));
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(event_fd_.get(), &one, sizeof one);
}

void MpiInternode::loop() {
    uint64_t last_progress = timing::now_ns();
    while (!stop_.load()) {
        std::deque<Command> commands;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            commands.swap(commands_);
        }
        bool progressed = !commands.empty();
        for (Command &c : commands) {
            switch (c.kind) {
                case Command::Kind::join:
                    if (node_ == 0) {
                        sequencer_join(0, c.key, c.rank, c.size, c.timeout_ms);
                    } else {
                        send_control(0, json{{"t", "join"},
                                             {"key", c.key},
                                             {"rank", c.rank},
                                             {"size", c.size},
                                             {"timeout", c.timeout_ms}}
                                            .dump());
                    }
                    break;
                case Command::Kind::broken: {
                    auto it = teams_.find(c.uid);
                    if (it == teams_.end()) break;
                    for (uint32_t n : it->second->nodes)
                        if (n != node_)
                            send_control(n, json{{"t", "broken"}, {"uid", c.uid}, {"why", c.why}}.dump());
                    on_broken(c.uid, c.why);
                    break;
                }
                case Command::Kind::start: {
                    auto it = teams_.find(c.op.team_uid);
                    Running r;
                    r.op = std::move(c.op);
                    if (it == teams_.end() || it->second->dead) {
                        InternodeEvent e;
                        e.kind = InternodeEvent::Kind::done;
                        e.team_uid = r.op.team_uid;
                        e.op_id = r.op.op_id;
                        e.comp_status = channel::kCollMemberLost;
                        e.reason = it == teams_.end() ? "no such team among the agents"
                                                      : it->second->dead_reason;
                        push_event(std::move(e));
                        break;
                    }
                    r.phase = r.op.check ? Running::Phase::header : Running::Phase::data;
                    r.deadline_ns = timing::now_ns() + uint64_t(options_.op_timeout_ms) * 1'000'000;
                    it->second->ops.push_back(std::move(r));
                    break;
                }
            }
        }
        receive_control();
        if (node_ == 0) sequencer_timeouts();
        progressed |= progress_ops();
        for (auto it = sends_.begin(); it != sends_.end();) {
            int done = 0;
            MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
            it = done ? sends_.erase(it) : std::next(it);
        }
        bool in_flight = !sends_.empty();
        for (auto &[uid, t] : teams_) in_flight |= !t->ops.empty();
        const uint64_t now = timing::now_ns();
        if (progressed) last_progress = now;
        if (in_flight && now - last_progress < kSpinNs) {
            sched_yield();
            continue;
        }
        std::unique_lock<std::mutex> lock(mutex_);
        if (commands_.empty())
            wake_.wait_for(lock, in_flight ? std::chrono::microseconds(50)
                                           : std::chrono::microseconds(1000));
    }
}

void MpiInternode::send_control(uint32_t to, const std::string &message) {
    auto text = std::make_shared<std::string>(message);
    MPI_Request req;
    int rc = MPI_Isend(text->data(), int(text->size()), MPI_CHAR, int(to), kControlTag, control_,
                       &req);
    if (rc != MPI_SUCCESS) {
        DP_LOG_WARN("agent node {}: sending to node {} failed: {}", node_, to, mpi_error(rc));
        return;
    }
    sends_.emplace_back(req, std::move(text));
}

void MpiInternode::receive_control() {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, kControlTag, control_, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        std::string text(size_t(std::max(n, 0)), '\0');
        if (MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, kControlTag, control_,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        on_control(uint32_t(st.MPI_SOURCE), text);
    }
}

void MpiInternode::on_control(uint32_t from, const std::string &text) {
    // Peers are agents of the same MPI job, but a malformed message must
    // still only cost a warning.
    json m = json::parse(text, nullptr, false);
    if (m.is_discarded() || !m.is_object() || !m.contains("t")) {
        DP_LOG_WARN("agent node {}: malformed message from node {} ignored", node_, from);
        return;
    }
    try {
        const std::string t = m.at("t").get<std::string>();
        if (t == "join" && node_ == 0) {
            sequencer_join(from, m.at("key").get<std::string>(), m.at("rank").get<uint32_t>(),
                           m.at("size").get<uint32_t>(), m.at("timeout").get<uint32_t>());
        } else if (t == "formed") {
            on_formed(m.at("key").get<std::string>(), m.at("uid").get<uint64_t>(),
                      m.at("map").get<std::vector<uint32_t>>());
        } else if (t == "join_failed") {
            InternodeEvent e;
            e.kind = InternodeEvent::Kind::join_failed;
            e.key = m.at("key").get<std::string>();
            e.rank = m.at("rank").get<uint32_t>();
            e.status = dp_status_t(m.at("status").get<int>());
            e.reason = m.at("reason").get<std::string>();
            push_event(std::move(e));
        } else if (t == "broken") {
            on_broken(m.at("uid").get<uint64_t>(), m.at("why").get<std::string>());
        } else {
            DP_LOG_WARN("agent node {}: unknown message '{}' from node {}", node_, t, from);
        }
    } catch (const json::exception &e) {
        DP_LOG_WARN("agent node {}: bad message from node {}: {}", node_, from, e.what());
    }
}

void MpiInternode::sequencer_join(uint32_t from, const std::string &key, uint32_t rank,
                                  uint32_t size, uint32_t timeout_ms) {
    auto refuse = [&](dp_status_t status, const std::string &why) {
        json m{{"t", "join_failed"}, {"key", key}, {"rank", rank}, {"status", int(status)},
               {"reason", why}};
        if (from == node_) on_control(node_, m.dump());
        else send_control(from, m.dump());
    };
    auto [it, fresh] = forming_.try_emplace(key);
    Forming &f = it->second;
    if (fresh) {
        f.size = size;
        f.node_of_rank.assign(size, UINT32_MAX);
        f.timeout_ms = timeout_ms;
        f.deadline_ns = timing::now_ns() + uint64_t(timeout_ms) * 1'000'000;
    }
    if (f.size != size)
        return refuse(DP_ERR_MISMATCH,
                      fmt::format("team '{}' has size {}; this member says {}", key, f.size, size));
    if (rank >= size)
        return refuse(DP_ERR_INVALID, fmt::format("team '{}': rank {} is not in 0..{}", key, rank,
                                                  size - 1));
    if (f.node_of_rank[rank] != UINT32_MAX)
        return refuse(DP_ERR_INVALID, fmt::format("team '{}': rank {} joined already (on node {})",
                                                  key, rank, f.node_of_rank[rank]));
    f.node_of_rank[rank] = from;
    if (std::count(f.node_of_rank.begin(), f.node_of_rank.end(), UINT32_MAX) != 0) return;
    const uint64_t uid = next_uid_++;
    std::vector<uint32_t> map = f.node_of_rank;
    forming_.erase(it);
    std::vector<uint32_t> nodes = map;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    const std::string formed = json{{"t", "formed"}, {"key", key}, {"uid", uid}, {"map", map}}.dump();
    for (uint32_t n : nodes)
        if (n != node_) send_control(n, formed);
    if (std::find(nodes.begin(), nodes.end(), node_) != nodes.end()) on_formed(key, uid, map);
}

void MpiInternode::sequencer_timeouts() {
    const uint64_t now = timing::now_ns();
    for (auto it = forming_.begin(); it != forming_.end();) {
        const Forming &f = it->second;
        if (now < f.deadline_ns) {
            ++it;
            continue;
        }
        std::string missing;
        std::vector<uint32_t> nodes;
        uint32_t joined = 0;
        for (uint32_t r = 0; r < f.size; ++r) {
            if (f.node_of_rank[r] == UINT32_MAX) {
                missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            } else {
                ++joined;
                nodes.push_back(f.node_of_rank[r]);
            }
        }
        const std::string why = fmt::format(
            "team '{}': {} of {} members joined within {} ms on {} node(s); missing rank(s) {}",
            it->first, joined, f.size, f.timeout_ms, nodes_, missing);
        std::sort(nodes.begin(), nodes.end());
        nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
        const std::string m = json{{"t", "join_failed"}, {"key", it->first}, {"rank", UINT32_MAX},
                                   {"status", int(DP_ERR_TIMEOUT)}, {"reason", why}}
                                  .dump();
        it = forming_.erase(it);
        for (uint32_t n : nodes) {
            if (n == node_) on_control(node_, m);
            else send_control(n, m);
        }
    }
}

void MpiInternode::on_formed(const std::string &key, uint64_t uid,
                             const std::vector<uint32_t> &map) {
    auto t = std::make_unique<TeamComm>();
    t->nodes = map;
    std::sort(t->nodes.begin(), t->nodes.end());
    t->nodes.erase(std::unique(t->nodes.begin(), t->nodes.end()), t->nodes.end());
    t->index = uint32_t(std::find(t->nodes.begin(), t->nodes.end(), node_) - t->nodes.begin());
    if (t->nodes.size() > 1) {
        // Collective over the team's nodes only; they all get here in the
        // order the sequencer formed the teams.
        MPI_Group world, group;
        MPI_Comm_group(control_, &world);
        std::vector<int> ranks(t->nodes.begin(), t->nodes.end());
        MPI_Group_incl(world, int(ranks.size()), ranks.data(), &group);
        int rc = MPI_Comm_create_group(control_, group, int(10 + uid % 30000), &t->comm);
        MPI_Group_free(&group);
        MPI_Group_free(&world);
        if (rc != MPI_SUCCESS) {
            t->dead = true;
            t->dead_reason = "creating the team's communicator failed: " + mpi_error(rc);
        } else {
            MPI_Comm_set_errhandler(t->comm, MPI_ERRORS_RETURN);
        }
    }
    InternodeEvent e;
    e.kind = InternodeEvent::Kind::formed;
    e.key = key;
    e.team_uid = uid;
    e.node_of_rank = map;
    teams_[uid] = std::move(t);
    ++teams_formed_;
    push_event(std::move(e));
}

void MpiInternode::on_broken(uint64_t uid, const std::string &why) {
    auto it = teams_.find(uid);
    if (it == teams_.end() || it->second->dead) return;
    TeamComm &t = *it->second;
    t.dead = true;
    t.dead_reason = why;
    // Requests of collectives cannot be cancelled or freed (MPI 3.1
    // §5.12): the ones in flight are abandoned with the team.
    while (!t.ops.empty()) finish(t.ops.front(), channel::kCollMemberLost, why), t.ops.pop_front();
    InternodeEvent e;
    e.kind = InternodeEvent::Kind::broken;
    e.team_uid = uid;
    e.reason = why;
    push_event(std::move(e));
}

void MpiInternode::finish(Running &r, uint8_t status, const std::string &reason) {
    InternodeEvent e;
    e.kind = InternodeEvent::Kind::done;
    e.team_uid = r.op.team_uid;
    e.op_id = r.op.op_id;
    e.comp_status = status;
    e.reason = reason;
    e.algorithm = inline_reduction(r.op) ? "inline-allgather" : r.algorithm;
    if (status == DP_COMP_SUCCESS) ++ops_done_;
    else ++ops_failed_;
    push_event(std::move(e));
}

// Posts r's next MPI call. false when MPI refused it (r is then finished).
bool MpiInternode::post_next(Running &r) {
    TeamComm &t = *teams_.at(r.op.team_uid);
    const InterOp &op = r.op;
    const int n = int(t.nodes.size());
    int rc = MPI_SUCCESS;
    const uint64_t esize = mover::dtype_size(op.dtype);
    if (r.phase == Running::Phase::header) {
        constexpr size_t slot = sizeof(Header) + kInlineBytes;
        r.mine = Header{op.count, op.root, op.opcode, op.dtype, op.redop, {}};
        r.fused.assign(slot * size_t(n + 1), 0);  // the last slot: this node's, to send
        uint8_t *own = r.fused.data() + slot * size_t(n);
        std::memcpy(own, &r.mine, sizeof(Header));
        if (inline_reduction(op)) std::memcpy(own + sizeof(Header), op.recv, op.elements * esize);
        rc = MPI_Iallgather(own, int(slot), MPI_BYTE, r.fused.data(), int(slot), MPI_BYTE, t.comm,
                            &r.request);
        r.phase = Running::Phase::header_wait;
    } else {
        switch (op.kind) {
            case InterOp::Kind::allreduce: {
                if (uses_schedule(r.op)) {
                    // All tag slots busy: post later (never MPI's own instead:
                    // every node must choose the same algorithm).
                    if (t.schedules_in_flight >= kTagSlots) return true;
                    if (!start_schedule(r, t)) {
                        r.error = "no inter-node schedule for " + options_.inter_algorithm;
                    }
                    break;
                }
                MPI_Op mpi_op;
                MPI_Op_create(kReduceFns[op.dtype * DP_OP_COUNT + op.redop], 1, &mpi_op);
                MPI_Datatype type;
                MPI_Type_contiguous(int(mover::dtype_size(op.dtype)), MPI_BYTE, &type);
                MPI_Type_commit(&type);
                rc = MPI_Iallreduce(MPI_IN_PLACE, op.recv, int(op.elements), type, mpi_op, t.comm,
                                    &r.request);
                // Both stay alive until the operation completes (MPI 3.1 §2.5.1).
                MPI_Type_free(&type);
                MPI_Op_free(&mpi_op);
                break;
            }
            case InterOp::Kind::bcast:
                rc = MPI_Ibcast(op.recv, int(op.bytes), MPI_BYTE, int(op.root_node), t.comm,
                                &r.request);
                break;
            case InterOp::Kind::barrier: rc = MPI_Ibarrier(t.comm, &r.request); break;
            case InterOp::Kind::allgatherv: {
                r.counts.resize(size_t(n));
                r.displs.resize(size_t(n));
                int at = 0;
                for (int i = 0; i < n; ++i) {
                    r.counts[size_t(i)] = int(op.part_bytes[size_t(i)]);
                    r.displs[size_t(i)] = at;
                    at += r.counts[size_t(i)];
                }
                rc = MPI_Iallgatherv(op.send, r.counts[t.index], MPI_BYTE, op.recv, r.counts.data(),
                                     r.displs.data(), MPI_BYTE, t.comm, &r.request);
                break;
            }
            case InterOp::Kind::alltoallv: {
                r.counts.resize(size_t(n));
                r.displs.resize(size_t(n));
                r.send_counts.resize(size_t(n));
                r.send_displs.resize(size_t(n));
                for (size_t i = 0; i < size_t(n); ++i) {
                    r.send_counts[i] = int(op.send_bytes[i]);
                    r.send_displs[i] = int(op.send_offsets[i]);
                    r.counts[i] = int(op.recv_bytes[i]);
                    r.displs[i] = int(op.recv_offsets[i]);
                }
                rc = MPI_Ialltoallv(op.send, r.send_counts.data(), r.send_displs.data(), MPI_BYTE,
                                    op.recv, r.counts.data(), r.displs.data(), MPI_BYTE, t.comm,
                                    &r.request);
                break;
            }
        }
        r.phase = Running::Phase::data_wait;
        if (!r.error.empty()) {
            finish(r, channel::kCollMemberLost, r.error);
            return false;
        }
    }
    if (rc != MPI_SUCCESS) {
        finish(r, channel::kCollMemberLost, "MPI refused the inter-node step: " + mpi_error(rc));
        return false;
    }
    return true;
}

// The gathered parts reduced in node order into the operation's buffer.
void MpiInternode::reduce_fused(Running &r, size_t nodes) {
    const size_t slot = sizeof(Header) + kInlineBytes;
    const size_t bytes = r.op.elements * mover::dtype_size(r.op.dtype);
    auto *out = static_cast<uint8_t *>(r.op.recv);
    std::memcpy(out, r.fused.data() + sizeof(Header), bytes);
    for (size_t k = 1; k < nodes; ++k)
        mover::kernels::reduce(out, out, r.fused.data() + k * slot + sizeof(Header), r.op.elements,
                               dp_dtype_t(r.op.dtype), dp_op_t(r.op.redop));
}

// An allreduce data step as a src/coll schedule over point-to-point, when
// the configuration (or "auto" by size) asks for one. false: use MPI's own.
bool MpiInternode::uses_schedule(const InterOp &op) const {
    const uint64_t bytes = op.elements * mover::dtype_size(op.dtype);
    const std::string &want = options_.inter_algorithm;
    return !(want == "native" || (want == "auto" && bytes < kAutoScheduleBytes));
}

bool MpiInternode::start_schedule(Running &r, TeamComm &t) {
    const InterOp &op = r.op;
    const std::string &want = options_.inter_algorithm;
    coll::CollectiveArgs args;
    args.collective = coll::Collective::allreduce;
    args.rank = int(t.index);
    args.size = int(t.nodes.size());
    args.count = op.elements;
    args.dtype = dp_dtype_t(op.dtype);
    args.op = dp_op_t(op.redop);
    args.in_place = true;
    coll::SelectorConfig selector;
    coll::Selection pick = coll::select_algorithm(args, selector);
    if (want != "auto") {
        pick.algorithm = coll::find_algorithm(coll::Collective::allreduce,
                                              want == "rd" ? "recursive_doubling" : want);
        if (!pick.algorithm) return false;  // checked at configuration; never here
    }
    args.chunk_bytes = pick.algorithm->pipelines ? pick.chunk_bytes : 0;
    auto schedule = std::make_unique<coll::Schedule>();
    if (coll::build_schedule(*pick.algorithm, args, schedule.get()) != DP_OK ||
        coll::mpi::ScheduleRunner::tag_span(*schedule) > kTagSpan)
        return false;
    const int tag_base = kTagBase + kTagSpan * int(t.schedules_posted++ % kTagSlots);
    r.schedule = std::move(schedule);
    r.runner = std::make_unique<coll::mpi::ScheduleRunner>(*r.schedule, t.comm, nullptr, op.recv,
                                                            tag_base);
    r.algorithm = pick.algorithm->name;
    ++t.schedules_in_flight;
    r.runner->start();
    return true;
}

bool MpiInternode::progress_ops() {
    bool progressed = false;
    const uint64_t now = timing::now_ns();
    for (auto &[uid, tp] : teams_) {
        TeamComm &t = *tp;
        bool earlier_posted = true;  // MPI needs one order of collectives per communicator
        for (auto it = t.ops.begin(); it != t.ops.end();) {
            Running &r = *it;
            bool done_now = false;
            if (r.op.sequence == t.mismatched_sequence) {
                finish(r, channel::kCollMismatch, "the nodes' members disagree on the operation");
                done_now = true;
            } else {
                if (earlier_posted && (r.phase == Running::Phase::header ||
                                       r.phase == Running::Phase::data)) {
                    progressed = true;
                    if (!post_next(r)) done_now = true;
                }
                if (!done_now && (r.phase == Running::Phase::header_wait ||
                                  r.phase == Running::Phase::data_wait)) {
                    int flag = 0;
                    int rc = MPI_SUCCESS;
                    if (r.runner) {
                        flag = r.runner->progress();
                        if (flag && r.runner->failed()) {
                            --t.schedules_in_flight;
                            finish(r, channel::kCollMemberLost,
                                   "inter-node " + r.algorithm + " failed: " + r.runner->error());
                            done_now = true;
                        } else if (flag) {
                            --t.schedules_in_flight;
                        }
                    } else {
                        rc = MPI_Test(&r.request, &flag, MPI_STATUS_IGNORE);
                    }
                    if (done_now) {
                    } else if (rc != MPI_SUCCESS) {
                        finish(r, channel::kCollMemberLost, "inter-node step failed: " + mpi_error(rc));
                        done_now = true;
                    } else if (flag && r.phase == Running::Phase::header_wait) {
                        progressed = true;
                        bool same = true;
                        const size_t slot = sizeof(Header) + kInlineBytes;
                        Header first, h;
                        std::memcpy(&first, r.fused.data(), sizeof(Header));
                        for (size_t k = 1; k < t.nodes.size(); ++k) {
                            std::memcpy(&h, r.fused.data() + k * slot, sizeof(Header));
                            same &= std::memcmp(&h, &first, sizeof(Header)) == 0;
                        }
                        if (same && inline_reduction(r.op)) {
                            reduce_fused(r, t.nodes.size());
                            finish(r, DP_COMP_SUCCESS, "");
                            done_now = true;
                        } else if (!same) {
                            t.mismatched_sequence = r.op.sequence;
                            finish(r, channel::kCollMismatch,
                                   "the members on different nodes disagree on the operation");
                            done_now = true;
                        } else {
                            r.phase = Running::Phase::data;
                            if (earlier_posted && !post_next(r)) done_now = true;
                        }
                    } else if (flag) {
                        progressed = true;
                        finish(r, DP_COMP_SUCCESS, "");
                        done_now = true;
                    } else if (now > r.deadline_ns) {
                        const std::string why = fmt::format(
                            "the inter-node step of a collective did not complete within {} ms "
                            "(a node is gone or unreachable)",
                            options_.op_timeout_ms);
                        DP_LOG_WARN("agent node {}: team {}: {}", node_, uid, why);
                        on_broken(uid, why);
                        return true;  // t.ops was emptied
                    }
                }
            }
            if (done_now) {
                it = t.ops.erase(it);
                continue;
            }
            earlier_posted &= r.all_posted();
            ++it;
        }
    }
    return progressed;
}

}  // namespace deputy::agent
