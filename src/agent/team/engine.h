// Teams, and the collectives the agent runs for them. The folder's parts:
//
//   engine.h             this class: the registry's public face
//   registry.cc          joins and forming on one node, leaves, clients gone,
//                        timeouts, the service thread's turn (progress()),
//                        info()
//   team.h               a team: members, queues, its board
//   queues.cc            posts in member order, the next operation taken
//                        when every local member has a head, failures
//   agreement.cc         what every execution checks first: heads agree,
//                        vector counts decode and agree, buffers are the
//                        members'
//   execution.h/.cc      one operation, whoever runs it: one interface
//   local_execution.cc   one node: on the engines, or on the service thread
//   node_execution.cc    several nodes: gather, steps between agents,
//                        write-back
//   node_membership.cc   several nodes: the member map the agents agree on
//   board_policy.cc      members running operations themselves: the board,
//                        the views, who runs an operation
//
// Forming: members send TEAM_JOIN (key, job secret, rank, size); a forming
// team is named by the secret's digest and the key together, so two jobs
// using one key never meet. It is ready when all `size` ranks joined, and
// every member is answered then (or at the first joiner's timeout, naming
// the missing ranks).
//
// Running: members post collectives into their rings (channel/coll_post.h).
// Each member's posts queue in order; when every member has a head, the
// heads must agree (collective, count, dtype, op, root) or all get
// kCollMismatch. The operation then becomes a plan of tasks
// (coll/local_plan.h; across nodes coll/node_plan.h), which the engines run
// (agent/coll_tasks.h): a member's mapped buffers in place, its ordinary
// memory copied through its process, on any engine, a window of tasks at a
// time so that other teams' operations interleave. The reduction order is
// fixed (rank 0, 1, 2, ...; across nodes each node's ranks, then the nodes),
// so results are bit-exact and the same on every member, floats included.
// Operations of one team run one at a time in posting order.
//
// What the service thread does itself: it matches, checks, plans, submits
// and collects, and it runs whole a plan of at most coll_inline_bytes of
// traffic (agent config; 0 turns it off) over mapped memory only, where a
// hand-off to an engine would cost more in wake-ups than the copy. Never
// more, and never a call into a member's process (ordinary memory), which
// could take as long as that process likes.
//
// With agents on several nodes (an Internode), membership is agreed among
// the agents, and a team whose members sit on more than one node runs its
// collectives as a task graph (node_execution.cc): the engines gather the
// local members' part into the agent's buffers, the agents exchange it, the
// engines write the results back; a reduction goes chunk by chunk.
#pragma once

#include <deputy/coll.h>
#include <deputy/mover.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "agent/client_session.h"
#include "agent/coll_tasks.h"
#include "agent/internode.h"
#include "channel/coll_post.h"
#include "channel/control.h"
#include "channel/p2p_post.h"
#include "channel/team_board.h"
#include "mover/device.h"
#include "mover/execute.h"

namespace deputy::agent {

class TeamEngine {
  public:
    struct Hooks {
        std::function<ClientSession *(uint32_t client_id)> find_client;
        // The answer to a join; fds travel with it (a team's board and views).
        std::function<void(ClientSession &, const channel::control::TeamReady &,
                           const std::vector<int> &fds)>
            send_ready;
        // Whether `more` file descriptors can be opened now (fd_budget.h);
        // false with the reason in *why.
        std::function<bool(uint64_t more, std::string *why)> room_for_fds;
    };

    TeamEngine(mover::Device *device, const AgentConfig &config, Hooks hooks,
               Internode *internode = nullptr);
    ~TeamEngine();

    // A member asks to join: checked against the per-client, per-process and
    // agent-wide limits, then added to the forming team of its job's secret
    // (digest) and key, made if there is none.
    void join(ClientSession &s, const channel::control::TeamJoin &m);
    // Teams holding a board (one file descriptor each).
    size_t boards() const;
    dp_status_t leave(ClientSession &s, uint32_t team_id, std::string *reason);
    void post(ClientSession &s, const channel::CollPost &post);
    // A point-to-point post (channel/p2p_post.h): a send or receive matched,
    // held or queued, a probe answered (p2p.cc).
    void post_p2p(ClientSession &s, const channel::P2pPost &post);
    // A client left or died: fails what its teams have queued and breaks
    // them. Never waits: an operation running over its buffers holds their
    // memory (ClientMemory) until the engines are done with it.
    void client_gone(ClientSession &s);
    // Timeouts and operations in flight; true when an operation finished or
    // started (real progress, not just "still running").
    bool progress();
    // True while the engines work on an operation.
    bool in_flight() const;
    // Sleeps until the engines finish a batch of an operation in flight or
    // timeout_ns passes: frees the service thread's core for the engines
    // (this machine has two) instead of polling.
    void wait_for_progress(int64_t timeout_ns);
    // True while something needs the service thread soon (an operation in
    // flight or a team forming): it must not sleep without a timeout.
    bool busy() const;
    void info(nlohmann::json *out) const;
    // Takes the Internode's events (teams formed among the agents, inter-
    // node steps done); true if there were any.
    bool poll_internode();

  private:
    struct Team;
    struct Execution;
    struct Posted;
    struct P2pMessage;
    struct P2pQueues;
    struct Transfer;
    struct NodeOutgoing;
    struct NodeSend;
    struct NodeReceive;

    Team *find_member_team(const ClientSession &s, uint32_t team_id, uint32_t *rank);
    void try_start(Team &t);
    // Agreement and checks common to one node and several, each 0 when
    // fine, else the status every local member gets: the heads of the local
    // ranks agree and are valid;
    uint8_t check_heads(Team &t, const std::vector<channel::CollPost> &heads);
    // a vector collective's counts blocks (the agent's copies) are well
    // formed and the local ranks' counts agree (ex.vectors filled);
    uint8_t check_vectors(Team &t, Execution &ex, const std::vector<Posted> &posted);
    // the members' buffers of the heads are theirs, and their memory is held
    // while the engines may touch it (DP_COMP_ADDRESS_DENIED, kCollMemberLost).
    uint8_t bind_members(Team &t, Execution &ex);
    // alltoallv: each of member r's blocks is in its pool or one registered range.
    uint8_t bind_vector_member(Team &t, Execution &ex, uint32_t r, const ClientSpace &space);
    // A vector collective's counts block, copied from the member's pool as
    // its post arrives (the one read of it).
    void copy_counts(ClientSession &s, const Team &t, Posted *p);
    // The running execution, whoever runs it (execution.cc): submits and
    // collects; true when it finished.
    bool advance(Team &t);
    void start_local(Team &t, const std::vector<Posted> &posted);  // one node
    bool advance_local(Team &t);  // the engines, or the service thread
    void finish(Team &t, uint8_t status, const std::string &why = {});
    void fail_all(const std::vector<channel::CollPost> &heads, Team &t, uint8_t status);
    void publish(uint32_t client_id, uint64_t record, uint8_t status, uint64_t bytes, uint64_t user);
    uint32_t teams_of(uint32_t client) const;  // teams it belongs to or is joining
    // A client's joins waiting for their teams (a rank of a forming team, or
    // a join the agents of several nodes have not answered): kept as a
    // count, so that checking max_pending_joins costs nothing.
    uint32_t joins_pending(uint32_t client) const;
    // ... of every client of process `pid` together.
    uint32_t process_joins_pending(pid_t pid) const;
    void unpend(uint32_t client);
    bool poll_orphans();
    void form_timeouts();
    void break_team(Team &t, const std::string &why);
    // Fails the queued posts of operation sequences >= from.
    void fail_queued_from(Team &t, uint64_t from);
    size_t window() const;  // tasks of one operation with the engines at once
    // Whether a plan moving `traffic` bytes runs on the service thread now
    // (it then counts against this turn's share): over mapped memory only,
    // at most coll_inline_bytes, and only while the service thread has run
    // less than coll_inline_bytes of plans since it last refilled the
    // engines (progress()). Beyond that, small operations go to the engines
    // too: many small ones cannot keep a large one's window from being
    // refilled, and the large one's window bounds what they wait behind.
    bool run_inline(uint64_t traffic, bool all_in_place);
    // Several nodes (node_membership.cc, node_execution.cc).
    bool multi_node() const { return internode_ && internode_->nodes() > 1; }
    void join_nodes(ClientSession &s, const channel::control::TeamJoin &m,
                    const std::array<uint8_t, 32> &secret);
    // Test mode (AgentConfig::test_stand_in_key): the rest of the joiner's block.
    void join_stand_ins(const std::string &key, const channel::control::TeamJoin &m,
                        uint32_t timeout_ms);
    static std::string node_key(const std::array<uint8_t, 32> &secret, const std::string &key);
    static std::string plain_key(const std::string &node_key);
    void on_formed(const InternodeEvent &e);
    void on_join_failed(const InternodeEvent &e);
    void on_step_done(const InternodeEvent &e);
    void start_nodes(Team &t, std::vector<Posted> posted);
    bool advance_nodes(Team &t);
    void post_step(Team &t, uint32_t group);
    void retire(Team &t);  // before a team is erased
    // Waiting members running operations (board_policy.cc): a board and
    // the members' pool views for a team that formed on one node (nothing
    // when rank_execution is off or a view is missing);
    void offer_board(Team &t, channel::control::TeamReady *ready, std::vector<UniqueFd> *fds);
    // once every member posted (so mapped the board when the team formed):
    // nobody maps it writable from then on, through /proc/<pid>/fd either;
    void close_board(Team &t);
    // before the agent runs operation t.ops: true when it does; false when
    // the members claimed it (ex goes back to t.spare) or it failed;
    bool agent_runs(Team &t, std::unique_ptr<Execution> &ex);
    // who runs operation `seq`, read once: the agent claims it when nobody
    // has (kOwnerAgent, also without a board); kOwnerRanks when the members
    // claimed it, and then they write its records; anything else when a
    // member wrote nonsense there, and then nobody runs it and the agent
    // owes its records a failure;
    channel::BoardOwner claim_for_agent(Team &t, uint64_t seq);
    // the next operation must wait: the members still run the last one.
    bool members_running(const Team &t) const;
    // An operation of the team finished (its records written): the board says so.
    void finished_on_board(Team &t);
    void forget_joins(uint32_t client);
    // Point-to-point (p2p.cc): a matched message's bytes moving (the
    // members' buffers checked when their posts arrived);
    void start_transfer(Team &t, std::unique_ptr<Transfer> x);
    // a receive took `m` (it may still be holding);
    void take_message(Team &t, const std::shared_ptr<P2pMessage> &m,
                      const channel::P2pPost &recv, uint32_t receiver);
    // a send or receive the agent takes (counted open for its poster):
    // matched, held or queued, under the team's point-to-point lock where
    // the team has cards;
    void take_p2p(Team &t, uint32_t client, uint32_t rank, const channel::P2pPost &p);
    // the cards' side (p2p.cc): whether a member took a queued message or
    // receive; claiming a card or receive word for the agent (false: a
    // member took it); a receiver's queues rid of what its member took;
    // the posts deferred while a member held the lock;
    bool member_took(const Team &t, const P2pMessage &m) const;
    bool member_took(const Team &t, uint32_t rank, const channel::P2pPost &recv) const;
    bool claim_message(Team &t, P2pMessage &m);
    bool claim_receive(Team &t, uint32_t rank, const channel::P2pPost &recv);
    void sweep_taken(Team &t, uint32_t rank);
    bool take_deferred(Team &t);  // false: none, or the lock is taken
    bool retry_deferred();
    // the transfers on the engines; true when one finished;
    bool progress_p2p();
    void finish_transfer(Transfer &x, uint8_t status, const std::string &why);
    // member `rank` (client `client`) left the team or died: its posts and
    // the messages for it go, what waits for it fails (messages it sent
    // that the agent holds stay for their receives). The others' messages
    // go on: a communicator freed by one member is still the others' until
    // they free it (MPI_Comm_free);
    void p2p_member_gone(Team &t, uint32_t rank, uint32_t client);
    // a team going away: its held messages go with it;
    void drop_p2p(Team &t);
    // a post's record: status, the message's length, its source and tag;
    void publish_p2p(uint32_t client, const channel::P2pPost &p, uint8_t status, uint64_t bytes,
                     uint32_t source, int32_t tag);
    void p2p_answered(Team *t, uint32_t rank);
    // an agent's copy of a message is no longer needed: freed, and its
    // bound (held, a node's credit, the stage) given back;
    void release_copy(P2pMessage &m);
    // Point-to-point between nodes (node_p2p.cc): whether `rank` is on
    // another node; a send to such a rank; a head or data from another
    // node's agent; a receive taking a message whose bytes are still there;
    bool on_other_node(const Team &t, uint32_t rank) const;
    void send_to_node(Team &t, const std::shared_ptr<P2pMessage> &m);
    void on_node_p2p(const InternodeEvent &e);
    void on_node_data(const InternodeEvent &e);
    void on_node_sent(const InternodeEvent &e);
    // a member's buffer as MPI may read or write it, where the agent maps
    // it (pool, shared heap); empty otherwise (its bytes then go through a
    // copy of the agent's, on the engines);
    P2pBytes mapped_buffer(uint32_t client, uint64_t addr, uint64_t bytes, bool write);
    void ask_for_data(Team &t, const std::shared_ptr<P2pMessage> &m,
                      const channel::P2pPost &recv, uint32_t receiver);
    bool start_asking(NodeReceive &r);  // false: no room yet
    void ask_waiting();  // the receives waiting for room, in order, while there is
    void outgoing_done(Transfer &x, uint8_t status);
    void answer_node_send(const P2pMessage &m, uint8_t status, uint32_t slot);
    void send_head(uint32_t node, const InterMessage &head);
    void flush_outbox();
    void return_credit(uint32_t node, uint64_t bytes);
    // this node's member `rank` left (tell the others), or another node's
    // did (its agent said so): sends waiting for it fail.
    void node_member_gone(Team &t, uint32_t rank);
    // another node's agent fell silent: each of its teams' members there
    // is gone, as if its agent had said so for each.
    void on_node_lost(const InternodeEvent &e);
    void drop_node_p2p(const Team &t);
    // heads about a team that has not formed here yet (its agents learn of
    // it in no fixed order with its messages): kept until it forms, then
    // taken in order, or refused after the team timeout.
    void replay_parked(uint64_t uid);
    void expire_parked();
    void refuse_node_message(const InternodeEvent &e);

    mover::Device *device_;
    // The agent's own address space for collective tasks (coll_tasks.h).
    CollTaskSpace task_space_;
    uint32_t task_pasid_ = 0;
    const AgentConfig &config_;
    Hooks hooks_;
    uint32_t next_team_id_ = 1;
    std::map<uint32_t, std::unique_ptr<Team>> teams_;
    // progress() serves the teams in turn from the one after the team it
    // served first last time, so that with the device queue full no team
    // is always refilled first.
    uint32_t first_served_ = 0;
    uint64_t inline_left_ = 0;  // run_inline()'s share left in this turn
    std::map<uint32_t, uint32_t> pending_;  // client id -> joins_pending()
    // node_key(secret, key) -> team id while members join: keys are scoped
    // by their job.
    std::map<std::string, uint32_t> forming_;
    // Operations whose team is gone while the engines still run their
    // tasks: kept (records, members' memory) until those complete.
    std::vector<std::unique_ptr<Execution>> orphans_;
    Internode *internode_ = nullptr;
    struct PendingJoin {
        uint32_t client = 0, rank = 0, size = 0;  // client 0: a stand-in (join_stand_ins())
        uint64_t join_id = 0;
    };
    // Several nodes: local joins by the key the agents agree on, which is
    // the job secret's digest and the team key (node_key()), so that only
    // members holding the same secret ever form one team.
    std::multimap<std::string, PendingJoin> joining_;
    std::map<uint64_t, uint32_t> by_uid_;              // several nodes: team uid -> team id
    uint64_t next_step_id_ = 1;
    // Buffers of inter-node steps abandoned with a broken team: MPI may
    // still write into them, so they are never freed.
    std::vector<std::shared_ptr<std::vector<uint8_t>>> abandoned_;
    uint64_t completed_ops_ = 0, failed_ops_ = 0, bytes_ = 0, rank_ops_ = 0;
    std::vector<std::unique_ptr<Transfer>> transfers_;  // point-to-point bytes moving
    uint64_t held_bytes_ = 0, held_messages_ = 0;       // early messages' copies, all teams
    uint64_t p2p_messages_ = 0, p2p_bytes_ = 0, p2p_failed_ = 0, p2p_held_total_ = 0;
    // With cards: messages their receivers copied themselves; posts
    // deferred while a member held a team's lock (all of them, and now).
    uint64_t p2p_member_copies_ = 0, p2p_member_copy_bytes_ = 0, p2p_deferred_total_ = 0,
             p2p_deferred_now_ = 0;
    // Point-to-point between nodes (node_p2p.cc): heads not sent yet, in
    // order; sends waiting for their receive on another node and receives
    // waiting for their bytes, by id; credit per node (early bytes this
    // agent may still send it) and credit owed (early bytes received from
    // it, not yet said); data slots free; bytes asked for and not delivered.
    std::deque<std::shared_ptr<NodeOutgoing>> outbox_;
    std::map<uint64_t, NodeSend> node_sends_;
    // Sends whose bytes MPI reads from the sender's buffer, by id: the
    // send completes when MPI is done with them.
    std::map<uint64_t, NodeSend> node_sending_;
    std::map<uint64_t, NodeReceive> node_receives_;
    std::deque<NodeReceive> node_waiting_;
    std::vector<uint64_t> node_credit_, node_owed_;
    std::vector<uint32_t> free_slots_;
    uint64_t staged_bytes_ = 0, next_node_id_ = 1;
    uint64_t node_eager_sent_ = 0, node_ready_sent_ = 0, node_received_ = 0;
    // Rendezvous messages MPI read from the sender's buffer, wrote into the
    // receiver's (no copy of the agent's on that side).
    uint64_t node_sent_mapped_ = 0, node_received_mapped_ = 0;
    struct Parked {
        uint64_t deadline_ns = 0;
        std::deque<InternodeEvent> events;
    };
    std::map<uint64_t, Parked> node_parked_;  // by team uid
    // Teams that were here and went (the last kRetiredUids): their heads
    // are refused at once rather than kept.
    std::deque<uint64_t> retired_uids_;
};

}  // namespace deputy::agent
