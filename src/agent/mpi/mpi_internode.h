// Internode over MPI: the agents of all nodes are one MPI job, and one
// thread per agent (the "node thread") makes every MPI call. Why a thread of
// its own rather than MPI_THREAD_MULTIPLE: the service thread must never
// block (it polls rings and sockets for every client), MPI progress needs
// someone calling into MPI while transfers are in flight, and one caller
// needs only MPI_THREAD_SERIALIZED, which every MPI library provides
// without the global locks that THREAD_MULTIPLE costs.
//
// Membership: every join goes to the agent of node 0 (the sequencer), which
// knows when a team's `size` ranks are in and sends the member map to every
// node of the team. Those maps leave node 0 in one order and MPI keeps the
// order between two processes, so all nodes create the teams' communicators
// (MPI_Comm_create_group, collective over the team's nodes only) in the
// same order.
//
// Collectives: every operation starts with a fixed-size check allgather
// (header + small reductions inline), then MPI's non-blocking collective on
// the team's communicator, or for allreduce a src/coll schedule over
// point-to-point (--inter). Calls are posted in the team's order on every
// node (an operation posts its next call only after every earlier operation
// of the team posted all of its calls); reductions use MPI operators that
// run deputy's kernels, so every dtype works and results match the
// single-node path's arithmetic.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/internode.h"
#include "common/fd.h"

namespace deputy::agent {

class MpiInternode final : public Internode {
  public:
    struct Options {
        uint32_t op_timeout_ms = 10000;  // an inter-node step not done by then fails
        // Allreduce among the agents (above the inline size): "native"
        // (MPI_Iallreduce), a schedule of src/coll run over MPI point-to-point
        // ("ring", "recursive_doubling", "rabenseifner"), or "auto" (by size,
        // docs/nodes.md).
        std::string inter_algorithm = "auto";
    };
    // After MPI_Init_thread (at least MPI_THREAD_SERIALIZED), on the thread
    // that will call MPI_Finalize after this object is gone.
    static std::unique_ptr<MpiInternode> create(const Options &options, std::string *error);
    ~MpiInternode() override;

    uint32_t node() const override { return node_; }
    uint32_t nodes() const override { return nodes_; }
    int event_fd() const override { return event_fd_.get(); }
    void join(const std::string &key, uint32_t rank, uint32_t size, uint32_t timeout_ms) override;
    void broken(uint64_t team_uid, uint64_t from_sequence, const std::string &why) override;
    void start(InterOp op) override;
    bool poll(InternodeEvent *out) override;
    void send_p2p(uint32_t node, std::shared_ptr<std::vector<uint8_t>> message) override;
    void send_p2p_data(uint32_t node, uint32_t slot, P2pBytes bytes, uint64_t sent_id) override;
    void receive_p2p_data(uint32_t node, uint32_t slot, P2pBytes into, uint64_t id) override;
    std::string describe() const override;

  private:
    struct Command;
    struct Running;
    struct TeamComm;
    struct Forming;
    struct P2pSend;
    struct P2pReceive;
    struct P2pDrain;

    MpiInternode() = default;
    void loop();
    void enqueue(Command c);  // for the node thread, which it wakes
    void push_event(InternodeEvent e);
    // Node thread only:
    void send_control(uint32_t to, const std::string &message);
    void receive_control();
    void on_control(uint32_t from, const std::string &message);
    // This node's joins of one team (key, size and timeout alike) from one
    // turn, to the sequencer in one message.
    void send_joins(const std::string &key, uint32_t size, uint32_t timeout_ms,
                    std::vector<uint32_t> ranks);
    void sequencer_join(uint32_t from, const std::string &key, uint32_t rank, uint32_t size,
                        uint32_t timeout_ms);
    void sequencer_timeouts();
    void on_formed(const std::string &key, uint64_t uid, const std::vector<uint32_t> &map);
    // from_sequence 0: every operation of the team, running ones too.
    void on_broken(uint64_t uid, uint64_t from_sequence, const std::string &why);
    bool progress_ops();
    bool post_next(Running &r);
    void finish(Running &r, uint8_t status, const std::string &reason);
    void reduce_fused(Running &r, size_t nodes);
    bool start_schedule(Running &r, TeamComm &t);
    bool uses_schedule(const InterOp &op) const;
    // Point-to-point between agents (mpi_p2p.cc): commands posted, heads
    // received, data moving; true when something happened.
    void p2p_command(Command &c);
    bool progress_p2p();
    bool p2p_in_flight() const;
    // A rendezvous message's bytes are moving: both agents committed to
    // the transfer, which MPI advances only inside its calls.
    bool p2p_data_moving() const;
    // A piece of lost node `node`'s data on `slot`, `bytes` long, whose
    // receive was cancelled: received into a sink should it still come;
    // and the sinks freed (at the end: whatever never came).
    void drain_piece(uint32_t node, uint32_t slot, size_t bytes);
    void free_drains(bool all);
    // Heartbeats (mpi_heartbeat.cc): every node tells every other it is
    // alive; a node not heard from for op_timeout_ms is lost (node_lost,
    // then every team of it broken). Point-to-point has no step that times
    // out, so without this a receive from a dead node's member would wait
    // forever. True when something happened.
    bool heartbeat();
    void free_heartbeats();

    Options options_;
    uint32_t node_ = 0, nodes_ = 1;
    MPI_Comm control_ = MPI_COMM_NULL;
    // Point-to-point between agents on a communicator of its own: its tags
    // never meet MPI_Comm_create_group's on control_.
    MPI_Comm p2p_ = MPI_COMM_NULL;
    UniqueFd event_fd_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Command> commands_;
    std::deque<InternodeEvent> events_;
    // Node thread state.
    std::list<std::pair<MPI_Request, std::shared_ptr<std::string>>> sends_;
    std::map<uint64_t, std::unique_ptr<TeamComm>> teams_;
    std::map<std::string, Forming> forming_;  // sequencer only
    uint64_t next_uid_ = 1;
    std::list<P2pSend> p2p_sends_;
    std::list<P2pReceive> p2p_receives_;
    std::list<P2pDrain> p2p_drains_;
    uint64_t last_p2p_ns_ = 0;  // the last head that came or went
    std::vector<uint64_t> heard_ns_;        // per node: its last heartbeat
    std::vector<MPI_Request> alive_sends_;  // per node: the heartbeat in flight
    std::vector<uint8_t> lost_;             // per node: declared lost
    uint64_t next_alive_ns_ = 0;
    // Receive buffers of lost nodes' data, which MPI may still own.
    std::vector<std::shared_ptr<const void>> abandoned_;
    std::atomic<uint64_t> nodes_lost_{0};
    std::atomic<uint64_t> teams_formed_{0}, ops_done_{0}, ops_failed_{0};
    std::atomic<uint64_t> p2p_heads_sent_{0}, p2p_heads_received_{0}, p2p_data_bytes_{0};
};

}  // namespace deputy::agent
