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
// What a member can make the agent keep is bounded: its posts not yet
// answered (queued, or moving) by DP_P2P_MAX_OUTSTANDING per team, as the
// library counts them; held copies by the agent's p2p_held_bytes and
// p2p_held_messages, all clients together.
#pragma once

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

// One send, from its arrival until its bytes reached the receiver (or its
// team went and took it along).
struct TeamEngine::P2pMessage {
    channel::P2pPost send{};
    uint32_t from = 0, to = 0;  // ranks
    uint32_t sender = 0;        // the sender's client id (its record)
    // An early message copied into the agent's memory: the copy runs
    // (holding) or is done (held: the send completed).
    std::shared_ptr<std::vector<uint8_t>> copy;
    bool holding = false, held = false;
    // The receive that took it while its copy was still running: the
    // delivery starts when the copy is done.
    bool taken = false;
    channel::P2pPost recv{};
    uint32_t receiver = 0;
};

struct TeamEngine::P2pQueues {
    explicit P2pQueues(uint32_t size) : recvs(size), arrived(size), open(size, 0) {}
    // By receiving rank: its receives no message matched yet, in order.
    std::vector<std::deque<channel::P2pPost>> recvs;
    // By receiving rank: the messages addressed to it that no receive
    // took yet, in the order their sends arrived.
    std::vector<std::deque<std::shared_ptr<P2pMessage>>> arrived;
    // By rank: its posts the agent took and has not answered yet.
    std::vector<uint32_t> open;
};

// The bytes of one message moving: from the sender's buffer to the
// receiver's, into the agent's copy, or from the copy to the receiver.
struct TeamEngine::Transfer {
    enum class Kind : uint8_t { direct, hold, deliver };
    Kind kind = Kind::direct;
    uint32_t team = 0;  // the team's id (it may be gone when this ends)
    std::shared_ptr<P2pMessage> message;
    // direct, deliver: the receive and its client.
    channel::P2pPost recv{};
    uint32_t receiver = 0;
    // hold, deliver: the agent's copy, kept while the engines may touch it
    // (even if its team goes meanwhile).
    std::shared_ptr<std::vector<uint8_t>> copy;
    // The members' memory the tasks touch, held until the last finished.
    std::vector<std::shared_ptr<ClientMemory>> memories;
    MemberBuffers buffers;
    coll::LocalPlan plan;
    TaskSet tasks;
};

}  // namespace deputy::agent
