// Collectives on the engines. The team engine turns an operation into a
// plan of tasks (coll/local_plan.h, coll/node_plan.h) and hands the tasks
// to the mover's engines as descriptors of the agent's own address space,
// CollTaskSpace, whose run() executes one task (coll/transport/memory):
// members' mapped buffers in place, their ordinary memory copied through
// their verified process, on whichever engine takes the task. The service
// thread only submits, a window at a time, and collects the records.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/client_space.h"
#include "coll/local_plan.h"
#include "coll/transport/memory/task_runner.h"
#include "mover/address_space.h"
#include "mover/device.h"

namespace deputy::agent {

// The buffers of one operation: each member's, through its ClientSpace, and
// the agent's own (several nodes).
class MemberBuffers final : public coll::TaskBuffers {
  public:
    struct Member {
        const ClientSpace *space = nullptr;  // null: not a member here
        uint64_t src = 0, dst = 0;           // its addresses, as it posted them
    };
    std::vector<Member> members;  // by rank
    uint8_t *send = nullptr, *recv = nullptr;
    uint64_t send_bytes = 0, recv_bytes = 0;

    uint8_t *in_place(const coll::Piece &piece, uint64_t len, bool write) const override;
    bool copy_in(const coll::Piece &piece, void *out, uint64_t len,
                 std::string *why) const override;
    bool copy_out(const coll::Piece &piece, const void *in, uint64_t len,
                  std::string *why) const override;
    // Some member's process has exited.
    bool member_gone() const;
    // Every member's buffers are in its pool (mapped): nothing goes through
    // a process's memory calls.
    bool all_in_place() const { return !through_process; }
    bool through_process = false;  // set by whoever binds the members

  private:
    uint8_t *agent(const coll::Piece &piece, uint64_t len) const;
};

// One task as an engine sees it.
struct TaskContext {
    const coll::LocalPlan *plan = nullptr;
    uint32_t task = 0;
    const coll::TaskBuffers *buffers = nullptr;
    std::string why;  // written by the engine when the task fails
};

// The agent's own address space on the device, for collective tasks: a
// descriptor's src is a TaskContext, its completion record the agent's.
// Only the team engine submits under it; clients' descriptors always carry
// their own space, whatever they write.
class CollTaskSpace final : public mover::AddressSpace {
  public:
    void *translate(uint64_t addr, uint64_t len, mover::Access) const override {
        return addr == 0 || addr + len < addr ? nullptr : reinterpret_cast<void *>(addr);
    }
    bool run(const dp_desc_t &desc, const mover::ExecLimits &limits,
             mover::OpResult *result) const override;
};

// The tasks of one stage of an operation, in groups (a chunk of a
// reduction across nodes; one group otherwise), submitted to the engines a
// window at a time so that operations of other teams interleave with it.
class TaskSet {
  public:
    TaskSet() = default;
    TaskSet(const TaskSet &) = delete;
    TaskSet &operator=(const TaskSet &) = delete;

    // Tasks of group_of_task[i] (all group 0 when empty); nothing enabled.
    void reset(const coll::LocalPlan *plan, std::vector<uint32_t> group_of_task, uint32_t groups,
               const coll::TaskBuffers *buffers);
    // Its tasks may go to the engines (a group without tasks is done at once).
    void enable(uint32_t group);
    void enable_all();
    // Submits enabled tasks until `window` are in flight or the queue is
    // full. Nothing more after a failure.
    void pump(mover::Device &device, uint32_t wq, uint32_t pasid, size_t window);
    // Collects finished tasks; the groups completed since the last call.
    std::vector<uint32_t> poll();
    bool idle() const { return in_flight_.empty(); }
    // Every task of `group` finished (and the group was enabled).
    bool group_done(uint32_t group) const {
        return group < enabled_.size() && enabled_[group] && left_in_group_[group] == 0;
    }
    bool done() const { return finished_ == contexts_.size(); }
    bool failed() const { return status_ != DP_COMP_SUCCESS; }
    uint8_t status() const { return status_; }
    const std::string &why() const { return why_; }
    // A record still pending, to sleep on (nullptr: none).
    dp_completion_t *pending() const;

  private:
    const coll::LocalPlan *plan_ = nullptr;
    std::vector<uint32_t> group_of_task_;
    std::vector<uint32_t> left_in_group_;  // tasks not finished
    std::vector<bool> enabled_;
    std::vector<uint32_t> empty_enabled_;  // enabled groups with no task, reported once
    std::vector<TaskContext> contexts_;
    std::unique_ptr<dp_completion_t[]> records_;
    std::vector<uint32_t> in_flight_;
    size_t next_ = 0;  // the first task not submitted yet
    size_t finished_ = 0;
    uint8_t status_ = DP_COMP_SUCCESS;
    std::string why_;
};

}  // namespace deputy::agent
