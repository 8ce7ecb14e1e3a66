// Point-to-point messages of a team as the agent keeps them (p2p.cc):
// each member's receives not yet matched and the sends addressed to it not
// yet received, both in arrival order, and the transfers that move a
// matched message's bytes on the engines.
//
// A send that finds its receive moves in one transfer from the sender's
// buffer to the receiver's ("direct"). One that arrives first waits in its
// receiver's queue; if it is at most p2p_eager_bytes long and the agent's
// bounds for such messages allow, its bytes are copied into a buffer of the
// agent's ("hold") and the send completes, so that a program whose members
// all send before they receive goes on, as under MPI's eager protocol; the
// receive that takes it later gets the copy ("deliver"). Beyond the bounds
// the send just waits for its receive: back-pressure, never loss.
//
// A message between members on different nodes (node_p2p.cc) goes from
// the sender's agent to the receiver's: at most p2p_node_eager_bytes
// eagerly, its bytes behind its head, within the sending agent's credit
// with the receiving node (p2p_node_credit_bytes of such messages not yet
// received there); otherwise as a request to send, whose bytes follow once
// a receive took it, into a buffer of the receiving agent's
// (p2p_node_stage_bytes of those at once) or, where the agents map the
// sender's and the receiver's buffers (pool, shared heap), from one to the
// other by MPI alone. Either way it waits in its receiver's queue among
// the local ones, in the order it arrived.
//
// On a one-node team whose board has point-to-point cards, a waiting
// receiver may match and copy a message itself (client/p2p.h): the agent
// then decides matches only under the team's point-to-point lock, claims
// the cards of what it matches, holds or fails, and drops the posts and
// queue entries whose cards a member took. A post that comes while a
// member holds the lock waits in `deferred`, in order, for a later turn.
//
// What a member can make the agent keep is bounded: its posts not yet
// answered (queued, or moving) by DP_P2P_MAX_OUTSTANDING per team, as the
// library counts them; held copies by the agent's p2p_held_bytes and
// p2p_held_messages, all clients together.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "agent/coll_tasks.h"
#include "agent/team/engine.h"
#include "channel/p2p_post.h"
#include "coll/local_plan.h"

namespace deputy::agent {

// P2pMessage::from_node of a message from a member of this node.
inline constexpr uint32_t kThisNode = UINT32_MAX;

// One send, from its arrival until its bytes reached the receiver (or its
// team went and took it along).
struct TeamEngine::P2pMessage {
    channel::P2pPost send{};
    uint32_t from = 0, to = 0;  // ranks
    uint32_t sender = 0;        // the sender's client id (its record); 0: on another node
    // From another node: the sending agent's node and its name for the
    // message (the request to send's id).
    uint32_t from_node = kThisNode;
    uint64_t node_id = 0;
    // The message's bytes in the agent's memory, at copy_at: an early
    // message's copy, whose making runs (holding) or is done (held: the
    // send completed); or what came from another node.
    std::shared_ptr<std::vector<uint8_t>> copy;
    size_t copy_at = 0;
    enum class CopyOf : uint8_t {
        early,       // this node's early message: p2p_held_bytes / messages
        node_early,  // another node's early message: that node's credit
        node_data,   // another node's message, asked for: p2p_node_stage_bytes
    } copy_of = CopyOf::early;
    bool holding = false, held = false;
    // The receive that took it while its copy was still running: the
    // delivery starts when the copy is done.
    bool taken = false;
    channel::P2pPost recv{};
    uint32_t receiver = 0;
    // On a team with point-to-point cards (channel/team_board.h): its card
    // number (0: none), or that it went without one while its pair's cards
    // were in use (the pair's `offboard` count, taken back once matched).
    uint64_t card = 0;
    bool offboard = false;
};

struct TeamEngine::P2pQueues {
    // Made by the team's first point-to-point post: queues for this node's
    // members only (by Team::slot_of), a byte per rank for the others.
    P2pQueues(uint32_t members_here, uint32_t size) : members(members_here), node_gone(size, 0) {}
    struct Member {
        // Its receives no message matched yet, in order.
        std::deque<channel::P2pPost> recvs;
        // The messages addressed to it that no receive took yet, in the
        // order their sends arrived.
        std::deque<std::shared_ptr<P2pMessage>> arrived;
        // Its posts the agent took and has not answered yet.
        uint32_t open = 0;
    };
    std::vector<Member> members;
    Member *at(uint32_t slot) { return slot < members.size() ? &members[slot] : nullptr; }
    // With cards: posts that came while a member held the team's
    // point-to-point lock, taken in order once the agent gets it (each is
    // counted open for its poster meanwhile).
    struct Deferred {
        uint32_t client = 0, rank = 0;
        channel::P2pPost post{};
    };
    std::deque<Deferred> deferred;
    // By rank, for members on other nodes: its agent said it left.
    std::vector<uint8_t> node_gone;
};

// Several nodes (node_p2p.cc): a head for another node's agent, sent in the
// order heads were made once every one before it is ready (an early
// message's bytes are copied in first), so a pair's messages arrive there
// in their sending order.
struct TeamEngine::NodeOutgoing {
    uint32_t node = 0;
    std::shared_ptr<std::vector<uint8_t>> message;  // null: withdrawn
    bool ready = false;
};

// A send to another node waiting for its receive (a request to send went),
// by the id it went with.
struct TeamEngine::NodeSend {
    uint32_t team = 0;
    std::shared_ptr<P2pMessage> message;
};

// A receive that took a message of another node whose bytes are asked
// for (slot and buffer given) or wait for room (slot UINT32_MAX). The
// bytes come into the receiver's buffer where the agent maps it, else into
// `stage` and from there to the receiver on the engines.
struct TeamEngine::NodeReceive {
    uint32_t team = 0;
    std::shared_ptr<P2pMessage> message;
    channel::P2pPost recv{};
    uint32_t receiver = 0;
    uint32_t slot = UINT32_MAX;
    std::shared_ptr<std::vector<uint8_t>> stage;
};

// The bytes of one message moving: from the sender's buffer to the
// receiver's, into the agent's copy, or from the copy to the receiver.
struct TeamEngine::Transfer {
    // outgoing: a message for another node copied out of the sender's
    // buffer, behind its head (eager) or for its data slot.
    enum class Kind : uint8_t { direct, hold, deliver, outgoing };
    Kind kind = Kind::direct;
    uint32_t team = 0;  // the team's id (it may be gone when this ends)
    std::shared_ptr<P2pMessage> message;
    // direct, deliver: the receive and its client.
    channel::P2pPost recv{};
    uint32_t receiver = 0;
    // hold, deliver: the agent's copy, kept while the engines may touch it
    // (even if its team goes meanwhile).
    std::shared_ptr<std::vector<uint8_t>> copy;
    // outgoing: the eager head it fills, or the data slot it goes to.
    std::shared_ptr<NodeOutgoing> eager;
    uint32_t node = 0, slot = 0;
    // The members' memory the tasks touch, held until the last finished.
    std::vector<std::shared_ptr<ClientMemory>> memories;
    MemberBuffers buffers;
    coll::LocalPlan plan;
    TaskSet tasks;
};

}  // namespace deputy::agent
