// What every execution goes through, whoever runs it (execution.h): moved
// on by the one entry the registry calls, and finished with the members'
// records, the counters and the team's next operation.
#include <fmt/format.h>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"

namespace deputy::agent {

bool TeamEngine::advance(Team &t) {
    switch (t.running->runner) {
        case Execution::Runner::service_thread:
        case Execution::Runner::engines: return advance_local(t);
        case Execution::Runner::nodes: return advance_nodes(t);
    }
    return false;
}

void TeamEngine::finish(Team &t, uint8_t status, const std::string &why) {
    std::unique_ptr<Execution> ex = std::move(t.running);
    // A member that died while its memory was being read or written makes
    // the copy fail: that is a lost member, not a bad address (its pidfd
    // tells, before the session is dropped).
    if (status != DP_COMP_SUCCESS && status != channel::kCollMismatch && ex->buffers.member_gone())
        status = channel::kCollMemberLost;
    for (uint32_t r : t.local_ranks)
        publish(t.client_of(r), ex->heads[r].completion, status, ex->bytes, ex->heads[r].sequence);
    finished_on_board(t);
    if (status == DP_COMP_SUCCESS) {
        ++completed_ops_;
        bytes_ += ex->bytes;
    } else {
        ++failed_ops_;
        DP_LOG_WARN("agent: team '{}' {} failed: {}{}", t.key, coll::collective_name(ex->collective),
                    channel::coll_status_name(status), why.empty() ? "" : " (" + why + ")");
    }
    if (!ex->across_nodes() && ex->idle()) {
        ex->recycle();
        t.spare = std::move(ex);
    }
    try_start(t);
}

}  // namespace deputy::agent
