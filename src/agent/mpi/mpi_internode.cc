// MpiInternode's life and public API (commands in, events out) and the node
// thread's loop. Membership is in mpi_membership.cc, collectives' MPI calls in
// mpi_operations.cc; the state they share in mpi_internode_state.h.
#include "agent/mpi/mpi_internode.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "agent/mpi/mpi_internode_state.h"
#include "channel/coll_post.h"
#include "common/timing.h"

namespace deputy::agent {
namespace {

using nlohmann::json;

// After this long without progress the node thread stops spinning and
// sleeps in short naps while operations are in flight (two agents and their
// clients share two cores here).
constexpr uint64_t kSpinNs = 200'000;
constexpr uint64_t kP2pActiveNs = 1'000'000'000;

}  // namespace

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
    MPI_Comm_dup(MPI_COMM_WORLD, &self->p2p_);
    MPI_Comm_set_errhandler(self->p2p_, MPI_ERRORS_RETURN);
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

void MpiInternode::enqueue(Command c) {
    std::lock_guard<std::mutex> lock(mutex_);
    commands_.push_back(std::move(c));
    wake_.notify_one();
}

void MpiInternode::join(const std::string &key, uint32_t rank, uint32_t size,
                        uint32_t timeout_ms) {
    Command c;
    c.kind = Command::Kind::join;
    c.key = key;
    c.rank = rank;
    c.size = size;
    c.timeout_ms = timeout_ms;
    enqueue(std::move(c));
}

void MpiInternode::broken(uint64_t uid, uint64_t from_sequence, const std::string &why) {
    Command c;
    c.kind = Command::Kind::broken;
    c.uid = uid;
    c.from_sequence = from_sequence;
    c.why = why;
    enqueue(std::move(c));
}

void MpiInternode::start(InterOp op) {
    Command c;
    c.kind = Command::Kind::start;
    c.op = std::move(op);
    enqueue(std::move(c));
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

void MpiInternode::send_p2p(uint32_t node, std::shared_ptr<std::vector<uint8_t>> message) {
    Command c;
    c.kind = Command::Kind::p2p_head;
    c.node = node;
    c.bytes = std::move(message);
    enqueue(std::move(c));
}

void MpiInternode::send_p2p_data(uint32_t node, uint32_t slot, P2pBytes bytes,
                                 uint64_t sent_id) {
    Command c;
    c.kind = Command::Kind::p2p_data_send;
    c.node = node;
    c.slot = slot;
    c.data = std::move(bytes);
    c.uid = sent_id;
    enqueue(std::move(c));
}

void MpiInternode::receive_p2p_data(uint32_t node, uint32_t slot, P2pBytes into, uint64_t id) {
    Command c;
    c.kind = Command::Kind::p2p_data_receive;
    c.node = node;
    c.slot = slot;
    c.data = std::move(into);
    c.uid = id;
    enqueue(std::move(c));
}

std::string MpiInternode::describe() const {
    return fmt::format(
        "node {} of {} (MPI); teams formed {}, inter-node steps done {}, failed {}; "
        "point-to-point heads sent {}, received {}, data bytes {}; nodes lost {}",
        node_, nodes_, teams_formed_.load(), ops_done_.load(), ops_failed_.load(),
        p2p_heads_sent_.load(), p2p_heads_received_.load(), p2p_data_bytes_.load(),
        nodes_lost_.load());
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
        // Joins go to the sequencer by team, a message per turn and node,
        // not per rank.
        std::map<std::tuple<std::string, uint32_t, uint32_t>, std::vector<uint32_t>> joins;
        for (Command &c : commands) {
            switch (c.kind) {
                case Command::Kind::join:
                    joins[{c.key, c.size, c.timeout_ms}].push_back(c.rank);
                    break;
                case Command::Kind::broken: {
                    auto it = teams_.find(c.uid);
                    if (it == teams_.end()) break;
                    for (uint32_t n : it->second->nodes)
                        if (n != node_)
                            send_control(n, json{{"t", "broken"},
                                                 {"uid", c.uid},
                                                 {"from", c.from_sequence},
                                                 {"why", c.why}}
                                                .dump());
                    on_broken(c.uid, c.from_sequence, c.why);
                    break;
                }
                case Command::Kind::start: {
                    auto it = teams_.find(c.op.team_uid);
                    Running r;
                    r.op = std::move(c.op);
                    if (it == teams_.end() || it->second->dead_for(r.op.sequence)) {
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
                case Command::Kind::p2p_head:
                case Command::Kind::p2p_data_send:
                case Command::Kind::p2p_data_receive: p2p_command(c); break;
            }
        }
        for (auto &[team, ranks] : joins)
            send_joins(std::get<0>(team), std::get<1>(team), std::get<2>(team), std::move(ranks));
        receive_control();
        if (node_ == 0) sequencer_timeouts();
        progressed |= progress_ops();
        progressed |= progress_p2p();
        progressed |= heartbeat();
        for (auto it = sends_.begin(); it != sends_.end();) {
            int done = 0;
            MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
            it = done ? sends_.erase(it) : std::next(it);
        }
        bool in_flight = !sends_.empty() || p2p_in_flight();
        for (auto &[uid, t] : teams_) in_flight |= !t->ops.empty();
        const uint64_t now = timing::now_ns();
        if (progressed) last_progress = now;
        // A rendezvous message's bytes, which both agents committed to,
        // come soon, but MPI moves a large message's fragments only inside
        // its calls: napping between them made a 2 MiB message 7x slower
        // than a 1 MiB one. And members that exchange messages answer
        // within microseconds: after a head, spin a little before napping
        // (a ping-pong's round trip between nodes: 88 -> 18 us).
        const bool recent_head = now - last_p2p_ns_ < kSpinNs;
        if (p2p_data_moving() ||
            ((in_flight || recent_head) && now - last_progress < kSpinNs)) {
            sched_yield();
            continue;
        }
        // Heads from other nodes come unannounced: while members exchange
        // messages (one came or went within kP2pActiveNs), nap briefly.
        const bool p2p_active = now - last_p2p_ns_ < kP2pActiveNs;
        std::unique_lock<std::mutex> lock(mutex_);
        if (commands_.empty())
            wake_.wait_for(lock, in_flight || p2p_active ? std::chrono::microseconds(50)
                                                         : std::chrono::microseconds(1000));
    }
    free_heartbeats();
    free_drains(true);
}

}  // namespace deputy::agent
