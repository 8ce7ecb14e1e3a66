// Runs one task of a LocalPlan (coll/local_plan.h) over memory: the
// members' buffers as the agent reaches them (in place, or copied in and
// out through their process) and the agent's own. Called by whichever
// engine picked the task; nothing here is shared between tasks but the
// plan, which is read only.
#pragma once

#include <cstdint>
#include <string>

#include "coll/local_plan.h"

namespace deputy::coll {

// Where a task's pieces are, as the runner may touch them.
class TaskBuffers {
  public:
    virtual ~TaskBuffers() = default;
    // A pointer to [piece, +len) the runner may read (write: and write)
    // directly, or nullptr when the bytes must go through copy_in/copy_out.
    virtual uint8_t *in_place(const Piece &piece, uint64_t len, bool write) const = 0;
    // The bytes of [piece, +len) into out / from in. False with *why (the
    // range is not the member's, its process is gone, a page faulted).
    virtual bool copy_in(const Piece &piece, void *out, uint64_t len, std::string *why) const = 0;
    virtual bool copy_out(const Piece &piece, const void *in, uint64_t len,
                          std::string *why) const = 0;
    // Whether the runner writes this output. The agent writes every
    // member's; a member running the plan itself writes only its own
    // destination (its teammates write theirs from the same plan).
    virtual bool writes(const Piece &) const { return true; }
};

// Whether `task` has an output `buffers` writes (a runner skips the rest).
bool task_writes(const LocalPlan &plan, const Task &task, const TaskBuffers &buffers);

// DP_COMP_SUCCESS; DP_COMP_ADDRESS_DENIED with *why when an input could not
// be read (nothing was written); DP_COMP_PAGE_FAULT when an output could not
// be written (those before it were).
// The reduction follows the plan's input order exactly, whatever is in
// place and what is copied and whichever outputs are written, so the
// result is bit-exact whoever runs the task.
uint8_t run_task(const LocalPlan &plan, const Task &task, const TaskBuffers &buffers,
                 std::string *why);

}  // namespace deputy::coll
