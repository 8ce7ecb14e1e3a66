// The agent's side of waiting members running operations themselves
// (channel/team_board.h; docs/collectives.md, "When no core is spare"): the
// board and the pool views a team gets when it forms, the claim the agent
// makes before it runs an operation, and the order it keeps with what the
// members run.
#include <fcntl.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "agent/team/engine.h"
#include "agent/team/execution.h"
#include "agent/team/team.h"
#include "common/log.h"

namespace deputy::agent {

void TeamEngine::offer_board(Team &t, channel::control::TeamReady *ready,
                             std::vector<UniqueFd> *fds) {
    // A member's queue at the agent must hold every post it may have out,
    // or a refused post would shift the members' count of operations off
    // the agent's (the board names operations by that count).
    if (config_.rank_execution_bytes == 0 || config_.max_team_queue < DP_TEAM_MAX_OUTSTANDING ||
        multi_node() || t.agent_runs_all)
        return;
    if (t.size > channel::kMaxBoardMembers) {
        DP_LOG_INFO("agent: team '{}': {} members, more than a board holds ({}): the agent runs "
                    "its operations",
                    t.key, t.size, channel::kMaxBoardMembers);
        return;
    }
    // A board and a view of each member's pool and heap: all of them open
    // while the answer is sent, the board for as long as the team lives.
    if (std::string why; hooks_.room_for_fds && !hooks_.room_for_fds(1 + 2 * t.size, &why)) {
        DP_LOG_WARN("agent: team '{}': no board ({}): the agent runs its operations", t.key, why);
        return;
    }
    std::vector<channel::control::PoolView> views(t.size);
    std::vector<UniqueFd> view_fds, heap_fds;
    // A read-only file of a member's segment or heap: its teammates can map
    // it to read the sources it posts, never to write into it.
    auto read_only = [&](const Segment &s, uint32_t r, const char *what) {
        UniqueFd view(open(fmt::format("/proc/self/fd/{}", s.fd()).c_str(), O_RDONLY | O_CLOEXEC));
        if (!view)
            DP_LOG_WARN("agent: team '{}': no read-only view of rank {}'s {} ({}): the agent "
                        "runs its operations",
                        t.key, r, what, std::strerror(errno));
        return view;
    };
    for (uint32_t r = 0; r < t.size; ++r) {
        ClientSession *c = hooks_.find_client(t.client_of(r));
        if (!c || !c->memory || c->space().client_pool() == 0) return;  // not attached whole
        const Segment &segment = c->memory->segment;
        UniqueFd view = read_only(segment, r, "pool");
        if (!view) return;
        views[r] = {c->space().client_pool(), segment.size(), c->pool_offset,
                    c->space().pool_bytes()};
        view_fds.push_back(std::move(view));
        // The heap is shared at attach (client/context.cc), before any team:
        // a member without one has its heap buffers run by the agent.
        if (c->space().has_heap() && c->memory->heap.valid()) {
            UniqueFd heap = read_only(c->memory->heap, r, "heap");
            if (!heap) return;
            views[r].heap_base = c->space().client_heap();
            views[r].heap_bytes = c->space().heap_bytes();
            heap_fds.push_back(std::move(heap));
        }
    }
    Segment board;
    // Open to new writers until every member mapped it (close_board).
    if (Segment::create(fmt::format("deputy-team-{}", t.id), channel::TeamBoard::bytes(t.size),
                        &board, Segment::Pages::prefault, Segment::Writers::closable) != DP_OK) {
        DP_LOG_WARN("agent: team '{}': no memory for its board: the agent runs its operations",
                    t.key);
        return;
    }
    UniqueFd board_fd(fcntl(board.fd(), F_DUPFD_CLOEXEC, 0));
    if (!board_fd) {
        DP_LOG_WARN("agent: team '{}': no fd for its board ({}): the agent runs its operations",
                    t.key, std::strerror(errno));
        return;
    }
    t.board = channel::TeamBoard(board.data(), t.size);
    t.board.initialise(config_.rank_execution_bytes);
    fds->push_back(std::move(board_fd));
    for (UniqueFd &f : view_fds) fds->push_back(std::move(f));
    for (UniqueFd &f : heap_fds) fds->push_back(std::move(f));
    t.board_segment = std::move(board);
    ready->board_bytes = t.board_segment.size();
    ready->pools = std::move(views);
}

bool TeamEngine::agent_runs(Team &t, std::unique_ptr<Execution> &ex) {
    if (!t.board.valid()) return true;
    if (t.ops == 1) close_board(t);
    t.board.header().agent_started.store(t.ops, std::memory_order_release);
    // Who runs it: the claim word is the members' to write too, so it
    // is read once, and one that names nobody fails the operation
    // (its members would otherwise wait for records nobody writes).
    const channel::BoardOwner owner = t.board.claim(t.ops, channel::kOwnerAgent);
    // The board names operations by the members' count of their posts.
    // A member whose count is not the agent's (it is not the library)
    // would have its teammates run another operation than the agent's
    // under the same name: from here on the agent runs them all. (No
    // later operation can be claimed for the ranks yet: this one has
    // not finished. A member leaving its wait may have claimed later
    // ones for the agent, which changes nothing here.)
    if (!t.board.header().agent_only.load(std::memory_order_acquire))
        for (uint32_t r : t.local_ranks) {
            if (ex->heads[r].sequence + 1 == t.ops) continue;
            const std::string why = fmt::format(
                "rank {} of team '{}' numbers its post {}; the agent counts operation {}", r,
                t.key, ex->heads[r].sequence + 1, t.ops);
            if (owner != channel::kOwnerAgent) {
                // The members ran some other operation under this name
                // (their records are theirs), or nobody runs it.
                DP_LOG_WARN("agent: {}", why);
                if (owner != channel::kOwnerRanks)
                    fail_all(ex->heads, t, channel::kCollMemberLost);
                break_team(t, why);
                return false;
            }
            DP_LOG_WARN("agent: {}: the agent runs the team's operations from now on", why);
            t.board.header().agent_only.store(1, std::memory_order_release);
            break;
        }
    if (owner == channel::kOwnerRanks) {
        ++rank_ops_;  // theirs, records included; the next waits for it (try_start)
        t.spare = std::move(ex);
        return false;
    }
    if (owner != channel::kOwnerAgent) {
        fail_all(ex->heads, t, channel::kCollMemberLost);
        break_team(t, fmt::format("team '{}': operation {} has a claim no one could have "
                                  "made on its board",
                                  t.key, t.ops));
        return false;
    }
    return true;
}

size_t TeamEngine::boards() const {
    size_t n = 0;
    for (const auto &[id, t] : teams_) n += t->board_segment.valid();
    return n;
}

void TeamEngine::close_board(Team &t) {
    if (const dp_status_t st = t.board_segment.close_to_new_writers(); st != DP_OK)
        DP_LOG_DEBUG("agent: team '{}': its board stays open to new writers ({})", t.key,
                     dp_status_name(st));
}

channel::BoardOwner TeamEngine::claim_for_agent(Team &t, uint64_t seq) {
    return t.board.valid() ? t.board.claim(seq, channel::kOwnerAgent) : channel::kOwnerAgent;
}

bool TeamEngine::members_running(const Team &t) const {
    return t.board.valid() && t.board.completed() < t.ops;
}

void TeamEngine::finished_on_board(Team &t) {
    if (t.board.valid()) t.board.complete(t.ops);
}

}  // namespace deputy::agent
