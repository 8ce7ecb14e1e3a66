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
#include <string>
#include <vector>

namespace deputy::agent {

// The inter-node part of one collective, between the agents of a team's
// nodes (node order = ascending node id). Buffers belong to the agent and
// stay untouched by it until the matching `done` event.
struct InterOp {
    enum class Kind : uint8_t { allreduce, allgatherv, alltoallv, bcast, barrier };
    Kind kind = Kind::barrier;
    uint64_t team_uid = 0;
    uint64_t op_id = 0;     // echoed in the done event
    uint64_t sequence = 0;  // the team's operation number: chunks of one share it
    // What every node must agree on (the members' descriptor heads); a
    // difference between nodes fails the operation on all of them with
    // kCollMismatch. Only the first chunk of an operation checks.
    bool check = false;
    uint8_t opcode = 0, dtype = 0, redop = 0;
    uint64_t count = 0, root = 0;
    // allreduce: `elements` of `dtype` reduced with `redop` in place in
    // recv (a chunk of the operation's `count`). bcast: `bytes` from the node at index root_node into recv.
    // allgatherv: this node's part in send, parts of every node (bytes per
    // node in part_bytes) concatenated in node order into recv.
    // alltoallv: send holds the part for node j at send_offsets[j] of
    // send_bytes[j] bytes; recv gets node i's at recv_offsets[i].
    void *send = nullptr;
    void *recv = nullptr;
    uint64_t bytes = 0;
    uint32_t root_node = 0;
    uint64_t elements = 0;
    std::vector<uint64_t> part_bytes, send_bytes, send_offsets, recv_bytes, recv_offsets;
};

struct InternodeEvent {
    enum class Kind : uint8_t { formed, join_failed, done, broken };
    Kind kind = Kind::done;
    std::string key;             // formed, join_failed
    uint32_t rank = 0;           // join_failed: the rank whose join failed (or all: UINT32_MAX)
    uint64_t team_uid = 0;       // formed, done, broken
    std::vector<uint32_t> node_of_rank;  // formed: the agreed member map
    uint64_t op_id = 0;          // done
    uint8_t comp_status = 0;     // done: DP_COMP_*
    dp_status_t status = DP_OK;  // join_failed
    std::string reason;          // join_failed, done (on failure), broken
    std::string algorithm;       // done: what the inter-node step ran
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
    // team too (their members get kCollMemberLost).
    virtual void broken(uint64_t team_uid, const std::string &why) = 0;
    virtual void start(InterOp op) = 0;
    virtual bool poll(InternodeEvent *out) = 0;
    // For `deputy info`.
    virtual std::string describe() const = 0;
};

}  // namespace deputy::agent
