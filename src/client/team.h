// A member's view of a team: its id at the agent, rank and size, and a slab
// of completion records in the mapped pool, one per outstanding request.
// Posting a collective = take a free slot, zero its record, push one
// post (channel/coll_post.h); dp_test = one acquire load of the
// record's status. No allocation, lock or system call on that path (the
// doorbell write happens only when the agent sleeps).
//
// Few cache lines and pages, too: when the host sleeps or computes through
// a large collective, the agent streams the operands through every cache
// and TLB of this small machine, so each line and page the next post or
// the completing test touches is a memory access (docs/PERFORMANCE.md,
// one node). The slot bitmap, sequence and slot array live in the Team
// object itself, the bookkeeping in one line; the hot functions are
// [[gnu::hot]] so the compiler packs their code together (.text.hot).
#pragma once

#include <deputy/coll.h>

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>

#include "channel/coll_post.h"
#include "channel/p2p_post.h"
#include "client/context.h"
#include "client/rank_execution.h"
#include "client/remote_member.h"
#include "coll/collective.h"
#include "client/staged_collective.h"

namespace deputy::client {

class Team;

struct Request {
    Team *team = nullptr;
    dp_completion_t *record = nullptr;
    uint32_t slot = 0;
    StagedCollective staged;  // staged memory mode only
    // The slot's counts block in the pool, made by its first vector post
    // and kept for the next (freed with the team): a post allocates nothing.
    void *counts = nullptr;
    uint64_t sequence = 0;    // its operation's number on the team (1-based)
    // An adaptive dp_wait yields before it sleeps (client/context.h): the
    // operation is small.
    bool yield_first = false;
    // A point-to-point request (client/p2p.h): its slot is the team's
    // TeamP2p's, and no teammate runs it.
    bool p2p = false;
    uint8_t p2p_opcode = 0;  // channel::kP2pSend or kP2pRecv
    // Its card on the team's board (client/p2p.h), 0 for none: a send's
    // number on the ring of the pair (rank, p2p_post.peer); a receive's
    // post sequence + 1. And the post, which a receive matches by.
    uint64_t card = 0;
    channel::P2pPost p2p_post{};
};

class TeamP2p;

class Team {
  public:
    static dp_status_t join(Context *ctx, const std::string &key, int rank, int size,
                            unsigned timeout_ms, Team **out);
    ~Team();

    // Posts a collective (channel/coll_post.h); *req gets a slot.
    [[gnu::hot]] dp_status_t post(coll::Collective c, const void *src, void *dst, uint64_t count,
                                  dp_dtype_t dtype, dp_op_t op, uint64_t root, Request **req);
    // A vector collective (coll::is_vector): alltoallv's four arrays
    // (size() entries each, read now) go into a counts block in the pool
    // (coll/vector_counts.h), the slot's own, which the agent copies when
    // the post arrives.
    dp_status_t post_vector(coll::Collective c, const void *src, const size_t *scounts,
                            const size_t *sdispls, void *dst, const size_t *rcounts,
                            const size_t *rdispls, dp_dtype_t dtype, dp_op_t op,
                            uint64_t root, Request **req);
    dp_status_t leave();

    Context *context() const { return ctx_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    // Gives the request's slot back (any thread; lock-free).
    [[gnu::hot]] void release(Request *req);
    // The members may run operations themselves (client/rank_execution.h).
    RankExecution *ranks() const { return ranks_.get(); }
    uint32_t id() const { return id_; }
    // A remote context's link to its team proxy; null for a local team.
    RemoteMember *remote() const { return remote_.get(); }
    // The team's point-to-point side, made by its first message (its
    // records take pool room that teams without messages never use).
    dp_status_t p2p(TeamP2p **out);
    int outstanding() const {
        return DP_TEAM_MAX_OUTSTANDING - std::popcount(free_slots_.load(std::memory_order_relaxed));
    }

  private:
    static_assert(DP_TEAM_MAX_OUTSTANDING == 64, "one bit per slot in a 64-bit word");
    Team() = default;
    // Takes the lowest free slot: with few requests in flight the same
    // slots, and so the same lines, serve every operation.
    bool take_slot(uint32_t *slot);
    // The post into the ring; the request's slot is given back on failure.
    [[gnu::hot]] dp_status_t push(Request &r, channel::CollPost post);

    // What every post and release touches, in one cache line.
    alignas(64) std::atomic<uint64_t> free_slots_{~uint64_t(0)};  // bit i: slot i is free
    std::atomic<uint64_t> sequence_{0};  // the team's posting order, carried to the agent
    Context *ctx_ = nullptr;
    dp_completion_t *records_ = nullptr;  // DP_TEAM_MAX_OUTSTANDING, in the pool
    uint32_t id_ = 0;
    int rank_ = 0, size_ = 0;
    bool staged_ = false;  // the context's memory mode, read once

    std::array<Request, DP_TEAM_MAX_OUTSTANDING> slots_;
    std::unique_ptr<RankExecution> ranks_;  // null: the agent runs every operation
    std::unique_ptr<RemoteMember> remote_;  // a remote context's: posts go to its proxy
    std::mutex p2p_mutex_;                  // making p2p_
    std::atomic<TeamP2p *> p2p_ready_{nullptr};
    std::unique_ptr<TeamP2p> p2p_;
};

// After the record says done: copies a staged result out (once) and maps
// the record's status to the API's.
[[gnu::hot]] dp_status_t request_result(Request *req);

// Maps a collective's record status to the API's status.
[[gnu::hot]] dp_status_t coll_status(uint8_t record_status);

}  // namespace deputy::client
