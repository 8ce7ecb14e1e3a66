// A member running its team's operations itself, with its teammates, when
// it waits for one the agent has not started (channel/team_board.h says
// how the two sides agree; docs/collectives.md "When no core is spare"
// says why).
//
// Pull only: each member runs the tasks of the agent's own plan for the
// operation (coll/local_plan.h) that write its destination, through the
// same task runner (coll/transport/memory/task_runner.h), writing nothing
// but its own destination and reading the members' sources through
// read-only views of their pools: the bytes are those the agent's engines
// would have written. A member whose destination
// overlaps its source (in place) computes into scratch and writes it once
// every member has read its source. Its record is written when its
// destination is and every member has read its source; the operation is
// finished for the team when every member wrote.
//
// A vector collective (coll::is_vector) is planned from every member's
// counts block, which sits in its pool: each member copies every block
// once through the views, decodes and checks it as the agent would
// (coll/vector_counts.h), and plans from its copies. No scratch there: a
// member whose send blocks share a byte with its receive blocks leaves the
// operation to the agent.
//
// Claimed only when every member's post is on the board, agrees with the
// others and names buffers inside the members' pools, and the previous
// operation finished; anything else (registered memory, a disagreement the
// agent reports) stays the agent's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "channel/coll_post.h"
#include "channel/control.h"
#include "channel/team_board.h"
#include "coll/local_plan.h"
#include "coll/vector_counts.h"
#include "common/fd.h"
#include "common/scratch.h"
#include "common/segment.h"

namespace deputy::client {

class Context;
struct Request;

// One turn of a wait that sleeps on a team's board (RankExecution::wait,
// TeamP2p::wait): poll, then (adaptive mode) yield for a while, then sleep
// until the board's epoch moves past `seen`.
dp_status_t board_wait_turn(Context *ctx, const channel::TeamBoard &board, uint32_t seen,
                            uint64_t start_ns, bool yield_first);

class RankExecution {
  public:
    // From TEAM_READY and the segments that came with it, mapped already
    // (the board, then each member's segment, then the shared heaps):
    // nullptr when the team has none, or when this member cannot take part
    // (then it tells the board, and the agent runs everything).
    static std::unique_ptr<RankExecution> create(Context *ctx, uint32_t rank, uint32_t size,
                                                 const channel::control::TeamReady &ready,
                                                 std::vector<Segment> segments);
    ~RankExecution();

    // Before operation `seq` is posted: waits until the agent has taken
    // operations up to seq - DP_TEAM_MAX_OUTSTANDING (team_board.h).
    dp_status_t before_post(uint64_t seq);
    // This member's post of operation `seq`, before it goes to the agent.
    void posted(uint64_t seq, const channel::CollPost &post, Request *req);
    // The request is gone: its record is not ours to write any more.
    void released(Request *req);
    // dp_wait: runs what this member can until req's record is written.
    dp_status_t wait(Request *req);
    // dp_test: this member's part of what the members claimed (no claim).
    void progress();
    // dp_test_in_wait: marks this member waiting for req, as wait() does,
    // and may claim it. The mark stays when the call returns: the caller
    // comes back until req is done.
    void progress_in_wait(Request *req);
    // One turn of dp_teams_leave_wait: the caller stops coming back before
    // its operations are done (MPI_Waitany returned another request).
    // Withdraws the mark, gives the agent every operation up to the highest
    // mark this member set that nobody claimed, and runs this member's part
    // of those its teammates claimed on the strength of a mark. *done once
    // nothing is owed; otherwise call again (a teammate has yet to read).
    dp_status_t leave_wait(bool *done);

    // For point-to-point messages the member copies itself (client/p2p.h):
    // the board, and a teammate's bytes [addr, +len) as this process sees
    // them (null where its views do not reach).
    const channel::TeamBoard &board() const { return board_; }
    const uint8_t *view_of(uint32_t rank, uint64_t addr, uint64_t len) const {
        return rank < views_.size() ? views_[rank].at(addr, len) : nullptr;
    }
    uint32_t rank() const { return rank_; }

  private:
    struct Range {  // a piece of a member's memory as this process sees it
        const uint8_t *base = nullptr;
        uint64_t member_base = 0, bytes = 0;
        const uint8_t *at(uint64_t addr, uint64_t len) const;
    };
    struct View {  // a member's pool and its shared heap (bytes 0: none)
        Range pool, heap;
        const uint8_t *at(uint64_t addr, uint64_t len) const {
            const uint8_t *p = pool.at(addr, len);
            return p ? p : heap.at(addr, len);
        }
    };
    struct Mine {  // this member's post of an operation
        uint64_t seq = 0;
        channel::CollPost post{};
        Request *req = nullptr;
    };
    struct Open {  // an operation this member has read for, not finished
        uint64_t seq = 0;
        uint8_t status = 0;
        uint64_t bytes = 0;      // its destination's
        uint8_t *dst = nullptr;  // where scratch goes once every member read
        scratch::Buffer scratch;
    };

    RankExecution() = default;
    // Under mutex_: true when something moved.
    bool step(uint64_t upto, bool may_claim);
    bool claimable(uint64_t seq, const Mine &mine);
    // Reads every post of `seq` (false: one is not there or not usable).
    bool gather(uint64_t seq, const Mine &mine, std::vector<channel::CollPost> *posts,
                uint8_t *status);
    // gather() for a vector collective: every member's counts block into
    // vectors_, checked (false: not ours to run).
    bool gather_vectors(coll::Collective c, const std::vector<channel::CollPost> &posts,
                        uint64_t element_bytes, uint64_t max_bytes);
    void begin(uint64_t seq, const Mine &mine);
    bool try_finish(Open &o);
    void write_record(uint64_t seq, uint8_t status, uint64_t bytes);
    Mine &mine(uint64_t seq) { return mine_[seq % channel::kBoardSlots]; }
    class OwnOutputs;  // the buffers of an operation as this member runs its tasks

    Context *ctx_ = nullptr;
    uint32_t rank_ = 0, size_ = 0;
    bool claim_ = true;
    Segment board_segment_;
    channel::TeamBoard board_;
    std::vector<View> views_;
    std::vector<Segment> mappings_;  // teammates' views, read-only
    std::mutex mutex_;
    std::vector<Mine> mine_;
    uint64_t posted_ = 0;    // this member's last operation
    uint64_t executed_ = 0;  // every operation up to here: its part done or the agent's
    // The highest operation any thread of this member marked itself waiting
    // for: a leave must cover every operation a teammate may have claimed on
    // a mark, whichever thread set it (another may have cleared the word).
    std::atomic<uint64_t> highest_mark_{0};
    void mark_waiting(uint64_t seq);
    std::vector<Open> open_;
    // The last operation's plan, kept for the next with the same arguments.
    coll::LocalPlan plan_;
    std::optional<coll::LocalArgs> planned_for_;
    // A vector collective's blocks, by member, from the last gather().
    std::vector<coll::MemberVector> vectors_;
    std::vector<uint8_t> counts_copy_;
};

}  // namespace deputy::client
