// A member's point-to-point messages on one team (include/deputy/p2p.h):
// a slab of completion records in the mapped pool, one per outstanding
// request (DP_P2P_MAX_OUTSTANDING), apart from the collectives' slots and
// numbering: a message is not an operation of the team, and the team's
// board (client/rank_execution.h) never hears of it. Posting = take a free
// slot, zero its record, push one post (channel/p2p_post.h); completion is
// the record, as for a collective (dp_test / dp_wait).
#pragma once

#include <deputy/p2p.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "channel/p2p_post.h"
#include "client/team.h"

namespace deputy::client {

class TeamP2p {
  public:
    // The records come from the pool: DP_ERR_NOMEM names its free bytes.
    static dp_status_t create(Team *team, std::unique_ptr<TeamP2p> *out);
    ~TeamP2p();

    // A send or receive (channel::kP2pSend, kP2pRecv; flags: channel::P2pFlags
    // of a send); *req gets a slot.
    dp_status_t post(uint8_t opcode, uint8_t flags, const void *buf, uint64_t bytes, int peer,
                     int tag, Request **req);
    // Asks the agent whether a receive of (source, tag) would find a message.
    dp_status_t probe(int source, int tag, int *flag, dp_msg_status_t *status);
    // Gives the request's slot back (any thread; lock-free).
    void release(Request *req);

  private:
    static constexpr uint32_t kWords = DP_P2P_MAX_OUTSTANDING / 64;
    static_assert(DP_P2P_MAX_OUTSTANDING % 64 == 0, "whole words of slot bits");
    TeamP2p() = default;
    bool take_slot(uint32_t *slot);
    // Into the ring, or to a remote member's team proxy.
    dp_status_t push(Request &r, const channel::P2pPost &post);

    Team *team_ = nullptr;
    Context *ctx_ = nullptr;
    dp_completion_t *records_ = nullptr;  // DP_P2P_MAX_OUTSTANDING, in the pool
    std::array<std::atomic<uint64_t>, kWords> free_{};  // bit i of word w: slot 64w+i is free
    std::atomic<uint64_t> sequence_{0};
    std::unique_ptr<Request[]> slots_;
};

// A completed receive's (or probe's) status from its record.
void message_status(const dp_completion_t &record, dp_msg_status_t *status);

}  // namespace deputy::client
