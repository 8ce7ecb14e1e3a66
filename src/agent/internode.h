// What an agent needs from the agents of the other nodes (one agent per
// node, together one MPI job): agreement on a team's members, and the
// inter-node step of its collectives. The agent layer stays MPI-free: this
// is the interface, and src/agent/mpi/ implements it on a thread of its own
// (the only thread that calls MPI). Every call here is thread-safe and
// returns at once; outcomes come back as events, and event_fd() becomes
// readable while some wait, so the service thread can sleep in epoll.
#pragma once

#include <deputy/mover.h>
#include <deputy/status.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coll/node_plan.h"

namespace deputy::agent {

// The inter-node part of one collective, between the agents of a team's
// nodes (node order = ascending node id). Buffers belong to the agent and
// stay untouched by it until the matching `done` event.
struct InterOp {
    uint64_t team_uid = 0;
    uint64_t op_id = 0;     // echoed in the done event
    uint64_t sequence = 0;  // the team's operation number: chunks of one share it
    // What every node must agree on (the members' descriptor heads); a
    // difference between nodes fails the operation on all of them with
    // kCollMismatch. Only the first chunk of an operation checks.
    bool check = false;
    uint8_t opcode = 0, dtype = 0, redop = 0;
    uint64_t count = 0, root = 0;
    // The exchange (coll/node_plan.h), over the agent's send and recv
    // buffers; an allreduce's recv_offset is already applied to recv.
    coll::NodeExchange step;
    void *send = nullptr;
    void *recv = nullptr;
};

// Point-to-point between the agents of two nodes (agent/team/node_p2p.cc):
// what one agent tells another about a team's messages, as the head of a
// message on the agents' point-to-point channel. Every such message from
// one agent to another arrives in the order it was sent, so a pair of
// members' messages are matched in their sending order.
struct InterMessage {
    enum Kind : uint8_t {
        eager = 1,   // a message whose bytes follow this head
        ready = 2,   // request to send: a message of `bytes`, its bytes on request
        clear = 3,   // ready's answer: send message `id`'s bytes on data slot `slot`
                     // (status not DP_COMP_SUCCESS: do not; the send completes
                     // with it, or as sent when it is kP2pTruncated)
        credit = 4,  // `bytes` of early messages from the receiver's node were received
        gone = 5,    // member `from` left the team: nothing more comes from it
    };
    uint8_t kind = 0;
    uint8_t flags = 0;  // channel::kP2pSynchronous
    uint8_t status = 0; // clear
    uint8_t pad = 0;
    int32_t tag = 0;
    uint32_t from = 0, to = 0;  // ranks
    uint32_t slot = 0;          // clear
    uint32_t pad2 = 0;
    uint64_t team_uid = 0;
    uint64_t bytes = 0;
    uint64_t id = 0;  // ready, clear: the sending node's name of the message
};
static_assert(sizeof(InterMessage) == 48);

// The bytes of a rendezvous message as the Internode reads (a send) or
// writes (a receive) them: a buffer of the agent's, or a member's own
// buffer in memory the agent maps (its pool or shared heap), so that MPI
// moves it without a copy on either side. `owner` keeps the memory mapped
// until the Internode is done with it.
struct P2pBytes {
    std::shared_ptr<const void> owner;
    uint8_t *data = nullptr;
    size_t size = 0;
    static P2pBytes of(const std::shared_ptr<std::vector<uint8_t>> &v) {
        return {v, v->data(), v->size()};
    }
};

struct InternodeEvent {
    enum class Kind : uint8_t {
        formed,
        join_failed,
        done,
        broken,
        p2p,
        p2p_data,
        p2p_sent,
        node_lost
    };
    Kind kind = Kind::done;
    std::string key;             // formed, join_failed
    uint32_t rank = 0;           // join_failed: the rank whose join failed (or all: UINT32_MAX)
    uint64_t team_uid = 0;       // formed, done, broken
    std::vector<uint32_t> node_of_rank;  // formed: the agreed member map
    uint64_t op_id = 0;          // done
    uint8_t comp_status = 0;     // done: DP_COMP_*
    dp_status_t status = DP_OK;  // join_failed
    std::string reason;          // join_failed, done (on failure), broken
    // broken: the team's operations from this sequence on fail; those
    // before it were started by the node that broke it and run on.
    uint64_t from_sequence = 0;
    std::string algorithm;       // done: what the inter-node step ran
    // p2p: a message from the agent of node `node`: its head (checked for
    // size only) in `message`, and all of it, head first, in `bytes`.
    // p2p_data: the data of receive `op_id` arrived (comp_status) in the
    // buffer it was given.
    // p2p_sent: MPI is done reading the bytes of data send `op_id`.
    // node_lost: nothing came from the agent of node `node` for the node
    // timeout (its heartbeats included): its members are gone for every
    // team (`reason`); a broken event follows for each team it was in.
    uint32_t node = 0;
    InterMessage message;
    std::shared_ptr<std::vector<uint8_t>> bytes;
};

class Internode {
  public:
    virtual ~Internode() = default;
    virtual uint32_t node() const = 0;
    virtual uint32_t nodes() const = 0;
    virtual int event_fd() const = 0;
    // A local member joins team `key`; answered by a formed or join_failed
    // event once every node's members are in (or the timeout named).
    virtual void join(const std::string &key, uint32_t rank, uint32_t size,
                      uint32_t timeout_ms) = 0;
    // A local member of the team left or died: the other nodes break the
    // team too from operation `from_sequence` on (their members get
    // kCollMemberLost for those). The operations before it this node has
    // started and does its part of: they run to their end everywhere, so a
    // member that leaves after its last operation completed (MPI_Comm_free
    // right after an allreduce) does not fail the others' same operation,
    // still between their agents.
    virtual void broken(uint64_t team_uid, uint64_t from_sequence, const std::string &why) = 0;
    virtual void start(InterOp op) = 0;
    virtual bool poll(InternodeEvent *out) = 0;
    // Point-to-point between agents, in the order of the calls: a message
    // (an InterMessage head, then an eager message's bytes) to the agent of
    // `node`; a rendezvous message's bytes to it on data slot `slot` (none:
    // the message is withdrawn), answered by a p2p_sent event with
    // `sent_id` once MPI read them, unless `sent_id` is 0; and the receive
    // of such bytes from `node` on `slot` into `into` (its size: the bytes
    // expected), answered by a p2p_data event with `id`. The buffers stay
    // the Internode's until sent or received; a receive whose node is lost
    // is answered once MPI can no longer write into it (or, if MPI never
    // lets go, after the node timeout again).
    virtual void send_p2p(uint32_t node, std::shared_ptr<std::vector<uint8_t>> message) = 0;
    virtual void send_p2p_data(uint32_t node, uint32_t slot, P2pBytes bytes,
                               uint64_t sent_id) = 0;
    virtual void receive_p2p_data(uint32_t node, uint32_t slot, P2pBytes into, uint64_t id) = 0;
    // Data slots per agent: rendezvous receives in flight at once.
    static constexpr uint32_t kP2pSlots = 4096;
    // For `deputy info`.
    virtual std::string describe() const = 0;
};

}  // namespace deputy::agent
