// An operation whose members are all on this node, from agreed heads to
// the last record: the plan (coll/local_plan.h), then its tasks on the
// engines a window at a time (agent/coll_tasks.h), or all of them on the
// service thread when the plan is small and over mapped memory only.
#include <fmt/format.h>

#include <algorithm>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"

namespace deputy::agent {

void TeamEngine::start_local(Team &t, const std::vector<Posted> &posted) {
    ++t.ops;
    std::unique_ptr<Execution> ex = t.spare ? std::move(t.spare) : std::make_unique<Execution>();
    ex->heads.resize(t.size);
    for (uint32_t r : t.local_ranks) ex->heads[r] = posted[r].post;
    if (!agent_runs(t, ex)) return;
    if (uint8_t bad = check_heads(t, ex->heads)) return fail_all(ex->heads, t, bad);
    const channel::CollPost &h0 = ex->heads[0];
    ex->collective = *collective_of(h0);
    if (uint8_t bad = check_vectors(t, *ex, posted)) return fail_all(ex->heads, t, bad);
    if (uint8_t bad = bind_members(t, *ex)) return fail_all(ex->heads, t, bad);
    coll::LocalArgs args;
    args.collective = ex->collective;
    args.size = t.size;
    args.count = h0.count;
    args.dtype = dp_dtype_t(h0.dtype);
    args.op = coll::reduces(ex->collective) ? dp_op_t(h0.redop) : DP_SUM;
    args.root = h0.root;
    args.chunk_bytes = ex->buffers.all_in_place() ? config_.coll_chunk_bytes
                                                  : config_.coll_direct_chunk_bytes;
    args.vectors = &ex->vectors;
    if (coll::is_vector(args.collective) || ex->local.planned_for != args) {
        ex->local.plan = coll::build_local_plan(args);
        ex->local.planned_for.reset();
        if (!coll::is_vector(args.collective)) ex->local.planned_for = args;
    }
    // Small: cheaper on the service thread than the wake-ups of a hand-off
    // to an engine (bounded by coll_inline_bytes, so no client waits long
    // for it, and by the turn's share: run_inline()). Only over mapped memory: a call into a member's process
    // takes as long as the process likes (userfaultfd), and the service
    // thread serves everyone; engines can be relieved (mover/stall_watch.h).
    const bool inline_ = run_inline(ex->local.plan.traffic_bytes(), ex->buffers.all_in_place());
    ex->runner = inline_ ? Execution::Runner::service_thread : Execution::Runner::engines;
    if (!inline_) {
        ex->local.tasks.reset(&ex->local.plan, {}, 1, &ex->buffers);
        ex->local.tasks.enable_all();
    }
    t.running = std::move(ex);
    advance(t);
}

bool TeamEngine::advance_local(Team &t) {
    Execution &ex = *t.running;
    switch (ex.runner) {
        case Execution::Runner::service_thread: {
            uint8_t status = DP_COMP_SUCCESS;
            std::string why;
            for (const coll::Task &task : ex.local.plan.tasks)
                if ((status = coll::run_task(ex.local.plan, task, ex.buffers, &why)) !=
                    DP_COMP_SUCCESS)
                    break;
            finish(t, status, why);
            return true;
        }
        case Execution::Runner::engines:
            ex.local.tasks.poll();
            if (ex.local.tasks.done() || (ex.local.tasks.failed() && ex.local.tasks.idle())) {
                finish(t, ex.local.tasks.status(), ex.local.tasks.why());
                return true;
            }
            ex.local.tasks.pump(*device_, 0, task_pasid_, window());
            return false;
        case Execution::Runner::nodes: break;  // (advance() sends it to advance_nodes)
    }
    return false;
}

}  // namespace deputy::agent
