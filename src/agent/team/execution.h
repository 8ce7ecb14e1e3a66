// One operation of a team as the agent runs it, whoever runs its bytes:
//
//   on the engines      one node, its plan's tasks a window at a time
//                       (local_execution.cc);
//   on the service      one node, a plan of at most coll_inline_bytes of
//   thread              traffic over mapped memory only, run whole as it
//                       starts (no call into a member's process, which
//                       could take as long as it likes);
//   across nodes        gather on the engines, the steps between the
//                       agents, write-back on the engines
//                       (node_execution.cc).
//
// The registry sees one interface whatever runs it: poll() collects what
// the engines finished, idle() says nothing of it is with them (its
// members' memory may then go), pending() names a record to sleep on, and
// TeamEngine::advance() moves it on. What every runner shares (the heads,
// the members' buffers and memory, a vector collective's blocks) is here;
// each runner's own state is in its part.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/coll_tasks.h"
#include "agent/team/engine.h"
#include "channel/coll_post.h"
#include "coll/collective.h"
#include "coll/local_plan.h"
#include "coll/node_plan.h"
#include "coll/vector_counts.h"

namespace deputy::agent {

struct TeamEngine::Execution {
    enum class Runner : uint8_t { engines, service_thread, nodes };
    Runner runner = Runner::engines;

    std::vector<channel::CollPost> heads;  // by rank (local ranks filled)
    coll::Collective collective = coll::Collective::barrier;
    uint64_t bytes = 0;  // bytes a member receives (counters)
    // The members' memory the engines' tasks touch: held until the last
    // task finished, whoever of them leaves meanwhile.
    std::vector<std::shared_ptr<ClientMemory>> memories;
    MemberBuffers buffers;
    // A vector collective: each local rank's blocks, decoded from the
    // agent's copy of its counts block (by rank; other nodes' ranks empty).
    std::vector<coll::MemberVector> vectors;

    // One node (engines, service thread).
    struct Local {
        coll::LocalPlan plan;
        TaskSet tasks;
        // The arguments `plan` was built for. A team posting the same
        // collective again (a loop, the common case) gets its last
        // execution back (Team::spare) and the plan with it, instead of
        // allocating both again for every operation.
        std::optional<coll::LocalArgs> planned_for;
    } local;

    // Several nodes: the stages around the steps between agents, the
    // agent's buffers (shared with the abandoned list if the team breaks:
    // MPI may still write into them), the steps out (step id -> group) and
    // the groups whose step came back.
    struct Nodes {
        coll::NodeArgs args;
        coll::NodePlan plan;
        TaskSet gather, write_back;
        std::shared_ptr<std::vector<uint8_t>> send, recv;
        std::map<uint64_t, uint32_t> steps;
        uint32_t steps_posted = 0, steps_done = 0;
        bool checked = false;  // the first step carried the heads' check
        uint8_t status = DP_COMP_SUCCESS;
        std::string reason;
    } nodes;

    bool across_nodes() const { return runner == Runner::nodes; }
    // Collects what the engines finished (records only; advance() acts on it).
    void poll() {
        local.tasks.poll();
        nodes.gather.poll();
        nodes.write_back.poll();
    }
    // Nothing of it is with the engines.
    bool idle() const { return local.tasks.idle() && nodes.gather.idle() && nodes.write_back.idle(); }
    // A record of a task the engines have not finished, or nullptr.
    dp_completion_t *pending() {
        for (TaskSet *set : {&local.tasks, &nodes.gather, &nodes.write_back})
            if (dp_completion_t *record = set->pending()) return record;
        return nullptr;
    }
    // One node, ready for the team's next operation: nothing of the last
    // one is held (its members' memory above all); the plan and the
    // capacity stay.
    void recycle() {
        runner = Runner::engines;
        collective = coll::Collective::barrier;
        bytes = 0;
        memories.clear();
        buffers.members.clear();
        buffers.send = buffers.recv = nullptr;
        buffers.send_bytes = buffers.recv_bytes = 0;
        buffers.through_process = false;
        vectors.clear();
    }
};

}  // namespace deputy::agent
