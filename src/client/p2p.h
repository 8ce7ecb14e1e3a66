// A member's point-to-point messages on one team (include/deputy/p2p.h):
// a slab of completion records in the mapped pool, one per outstanding
// request (DP_P2P_MAX_OUTSTANDING), apart from the collectives' slots and
// numbering: a message is not an operation of the team. Posting = take a
// free slot, zero its record, push one post (channel/p2p_post.h);
// completion is the record, as for a collective (dp_test / dp_wait).
//
// On a team whose board has point-to-point cards (channel/team_board.h;
// the member runs operations itself, client/rank_execution.h) every send
// and receive also goes on the board, and a member waiting for a message
// matches and copies itself the oldest receive the agent has not matched
// yet, from a teammate's buffer its views reach (pool, shared heap): where
// ranks and agent share the cores, a waiting rank has the CPU the agent
// would need (docs/p2p.md, "When no core is spare"). A send a receiver
// took completes when its card says the bytes are copied; the sender
// writes its own record then.
#pragma once

#include <deputy/p2p.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "channel/p2p_post.h"
#include "channel/team_board.h"
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
    // Gives the request's slot back (any thread; lock-free without cards).
    void release(Request *req);

    // A request on the board's cards (Request::card): dp_wait's loop, which
    // takes messages for this member meanwhile, and dp_test's turn.
    static bool carded(const Request *req) { return req->card != 0; }
    dp_status_t wait(Request *req);
    void progress(Request *req);

  private:
    static constexpr uint32_t kWords = DP_P2P_MAX_OUTSTANDING / 64;
    static_assert(DP_P2P_MAX_OUTSTANDING % 64 == 0, "whole words of slot bits");
    TeamP2p() = default;
    bool take_slot(uint32_t *slot);
    // Into the ring, or to a remote member's team proxy.
    dp_status_t push(Request &r, const channel::P2pPost &post);
    // The board with cards, if this member uses them (null otherwise).
    const channel::TeamBoard *cards() const;
    // push() for a send or receive on the cards: the card first, taken
    // back if the post does not go.
    dp_status_t push_carded(const channel::TeamBoard &board, Request &r, channel::P2pPost &post);
    // The oldest receive the agent has not matched, matched and copied
    // here if a teammate's message for it is on the board; true if one was.
    bool take_message();
    // A carded send whose receiver copied it: its record written; true then.
    bool send_taken(Request *req);
    bool done(Request *req) const;

    Team *team_ = nullptr;
    Context *ctx_ = nullptr;
    dp_completion_t *records_ = nullptr;  // DP_P2P_MAX_OUTSTANDING, in the pool
    std::array<std::atomic<uint64_t>, kWords> free_{};  // bit i of word w: slot 64w+i is free
    std::atomic<uint64_t> sequence_{0};
    std::unique_ptr<Request[]> slots_;
    // The cards' bookkeeping (cards() only), under cards_mutex_: per
    // destination the last card number used; the send request each card
    // of this member's rings belongs to until it completed or went (a card
    // is reused only then); this member's carded receives in posting order,
    // oldest first; where an any-source search starts (fairness).
    std::mutex cards_mutex_;
    std::vector<uint64_t> sent_;
    std::vector<Request *> card_owner_;
    std::deque<Request *> recv_order_;
    uint32_t next_source_ = 0;
    // A receive freed before it completed: its match is the agent's, and
    // later receives must not overtake it, so this member matches no more.
    bool stop_taking_ = false;
};

// A completed receive's (or probe's) status from its record.
void message_status(const dp_completion_t &record, dp_msg_status_t *status);

}  // namespace deputy::client
