// Teams and the collectives the agent runs for them (single node).
//
// Forming: members send TEAM_JOIN (key, rank, size); the team is ready when
// all `size` ranks joined, and every member is answered then (or at the
// first joiner's timeout, naming the missing ranks).
//
// Running: members post collective descriptors into their rings
// (channel/coll_desc.h). Each member's posts queue in order; when every
// member has a head, the heads must agree (op, count, dtype, reduction,
// root) or all get DP_COMP_MISMATCH. Then the agent moves the bytes itself,
// with direct access to every member's buffers:
//  - all buffers in the members' pools (mapped): the operation becomes
//    batches of mover descriptors on agent pointers, one batch per chunk, so
//    the engines share the work and chunks pipeline across them. Allreduce
//    is the single-pass reduce for one node: rank 0's destination chunk =
//    src0 op src1, then += src2 ... += src(P-1), then copied to every other
//    destination — (P-1) reads and P writes per chunk, no scratch;
//  - any buffer in registered (direct) memory: the same order of work on the
//    service thread through bounce buffers (process_vm_readv/writev).
// The reduction order is fixed (rank 0, 1, 2, ...), so results are
// bit-exact and the same on every member, floats included.
// Operations of one team run one at a time in posting order.
//
// With agents on several nodes (an Internode), membership is agreed among
// the agents, and a team whose members sit on more than one node runs its
// collectives hierarchically (team_engine_nodes.cc): this agent gathers its
// local members' part into its own buffers, the agents of the team's nodes
// exchange it, and this agent writes the results to its local members.
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
#include "agent/internode.h"
#include "channel/control.h"
#include "mover/device.h"
#include "mover/execute.h"

namespace deputy::agent {

class TeamEngine {
  public:
    struct Hooks {
        std::function<ClientSession *(uint32_t client_id)> find_client;
        std::function<void(ClientSession &, const channel::control::TeamReady &)> send_ready;
    };

    TeamEngine(mover::Device *device, const mover::ExecLimits &limits, const AgentConfig &config,
               Hooks hooks, Internode *internode = nullptr);
    ~TeamEngine();

    // A member asks to join: checked against the per-client and agent-wide
    // limits and, for a team already forming, against the job secret its
    // first member gave (compared as digests, in constant time).
    void join(ClientSession &s, const channel::control::TeamJoin &m);
    dp_status_t leave(ClientSession &s, uint32_t team_id, std::string *reason);
    void post(ClientSession &s, const dp_desc_t &d);
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

    Team *find_member_team(const ClientSession &s, uint32_t team_id, uint32_t *rank);
    void try_start(Team &t);
    void start(Team &t, std::vector<dp_desc_t> heads);
    bool advance(Team &t);  // submits/polls the running execution; true when it finished
    void finish(Team &t, uint8_t status);
    void fail_all(const std::vector<dp_desc_t> &heads, Team &t, uint8_t status);
    void publish(uint32_t client_id, uint64_t record, uint8_t status, uint64_t bytes, uint64_t user);
    uint32_t teams_of(uint32_t client) const;  // teams it belongs to or is joining
    bool poll_orphans();
    bool run_bounced(Team &t, const std::vector<dp_desc_t> &heads, std::string *why);
    void form_timeouts();
    void break_team(Team &t, const std::string &why);
    bool read_member(uint32_t client, uint64_t addr, void *out, uint64_t len, std::string *why);
    bool write_member(uint32_t client, uint64_t addr, const void *in, uint64_t len,
                      std::string *why);
    // Several nodes (team_engine_nodes.cc).
    bool multi_node() const { return internode_ && internode_->nodes() > 1; }
    void join_nodes(ClientSession &s, const channel::control::TeamJoin &m,
                    const std::array<uint8_t, 32> &secret);
    static std::string node_key(const std::array<uint8_t, 32> &secret, const std::string &key);
    static std::string plain_key(const std::string &node_key);
    void on_formed(const InternodeEvent &e);
    void on_join_failed(const InternodeEvent &e);
    void on_step_done(const InternodeEvent &e);
    void start_nodes(Team &t, std::vector<dp_desc_t> heads);
    void finish_nodes(Team &t);
    void retire(Team &t);  // before a team is erased
    void forget_joins(uint32_t client);

    mover::Device *device_;
    mover::ExecLimits limits_;
    const AgentConfig &config_;
    Hooks hooks_;
    uint32_t next_team_id_ = 1;
    std::map<uint32_t, std::unique_ptr<Team>> teams_;
    std::map<std::string, uint32_t> forming_;  // key -> team id while members join
    // Operations whose team is gone while the engines still run their
    // batches: kept (records, members' memory) until those complete.
    std::vector<std::unique_ptr<Execution>> orphans_;
    Internode *internode_ = nullptr;
    struct PendingJoin {
        uint32_t client = 0, rank = 0, size = 0;
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
    uint64_t completed_ops_ = 0, failed_ops_ = 0, bytes_ = 0;
};

}  // namespace deputy::agent
