// A team's board: the shared page where its members and the agent agree on
// who runs each operation, so that ranks waiting for an operation the agent
// has not started yet can run it themselves (docs/collectives.md, "When no
// core is spare").
//
// The agent creates it (a memfd) when a one-node team forms and passes it
// with TEAM_READY, together with a read-only view of every member's pool.
// Everything in it is writable by every member: the agent and each rank
// read what they need once, check the copy, and nothing a member writes here
// can make the agent touch memory outside the team's posted buffers or make
// another member write anywhere but its own destination.
//
//   [0, 4 KiB)                      BoardHeader
//   [4 KiB, +size x 64)             per member: the operation it waits for in dp_wait
//   next page, +kBoardSlots x 64    BoardOp per operation slot
//   then size x kBoardSlots posts   each member's copy of its posts (CollPost)
//   then, for a team of at most kMaxCardMembers, its point-to-point cards:
//     size x DP_P2P_MAX_OUTSTANDING words: each member's receives, by request slot
//     size x size pairs (from, to): a PairHeader and kPairCards SendCards
//
// Operation `seq` (1-based, the team's posting order: the agent's count and
// each member's) lives in slot seq % kBoardSlots. Its claim word says who
// runs it: the agent (when it starts the operation) or the ranks (the first
// member that waits for it and finds every post there). Whoever claims it
// writes the members' records: the agent as it always did; with the ranks,
// each member its own, after its part (its own destination, read from the
// members' sources in their pools) and once every member has read its
// source. Operations finish in order: neither side starts `seq` before
// `completed` reaches seq - 1. The members claim only an operation every
// one of them waits for (inside dp_wait for it or a later one): each is
// then there to run its part, so a member never depends on another calling
// into the library, which the agent's operations never need either.
//
// Point-to-point (client/p2p.h, agent/team/p2p.cc; docs/p2p.md, "When no
// core is spare"): a receiver waiting for a message the agent has not
// matched yet may match it and copy it itself, as Open MPI's ranks do over
// shared memory. So that it can, a sender puts each message for a teammate
// on a card of their pair's ring (its tag, length and buffer), in sending
// order, and a receiver puts each receive's state on its word. A card or
// word goes posted -> agent (the agent matched, held or failed it) or
// posted -> taken (the receiver; a card then -> done once its bytes are
// copied and the sender completes on seeing that). Every change from
// posted is a compare-and-swap, and who matches decides under the team's
// point-to-point lock: the receiver takes its oldest unmatched receive and,
// per sender, the oldest unmatched message it accepts only while holding
// it; the agent never waits for the lock (it defers the post to a later
// turn). A message that found no free card travels without one, and its
// pair's `offboard` count and `barrier` keep receivers from overtaking it
// until the agent matched it. Cards carry copies of what the posts say: the agent
// reads only their state words and moves bytes by the posts it received.
#pragma once

#include <deputy/p2p.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "channel/coll_post.h"

namespace deputy::channel {

// More than a member's outstanding operations (DP_TEAM_MAX_OUTSTANDING), so
// that slots are reused only by operations long finished.
inline constexpr uint32_t kBoardSlots = 128;
// The largest team with a board: its members' posts take kBoardSlots x 64
// bytes each (2 MiB at 256) and each member maps 2 x size views; a larger
// one-node team has the agent run every operation.
inline constexpr uint32_t kMaxBoardMembers = 256;
inline constexpr uint64_t kBoardMagic = 0x44524f424d414554ull;  // "TEAMBORD"

// Teams of at most this many members get point-to-point cards: a ring per
// ordered pair, so the board grows with the square of the team here.
inline constexpr uint32_t kMaxCardMembers = 16;
inline constexpr uint32_t kPairCards = 16;

// A card's or receive word's state: (number << 3) | CardState, where the
// number is the card's (a pair's count of carded messages, from 1) or the
// receive's post sequence + 1.
enum CardState : uint64_t {
    kCardEmpty = 0,
    kCardPosted = 1,  // waiting for a match
    kCardHeld = 2,    // a message the agent copied aside before its receive came: not the ranks'
    kCardAgent = 3,   // the agent matched (or failed) it
    kCardTaken = 4,   // the receiver matched it and is copying it
    kCardDone = 5,    // (messages) the receiver copied it: the send is complete
    kCardLost = 6,    // (messages) the receiver died while it copied: the send fails
};
inline uint64_t card_word(uint64_t number, CardState st) { return (number << 3) | st; }
inline uint64_t card_number(uint64_t word) { return word >> 3; }
inline CardState card_state(uint64_t word) { return CardState(word & 7); }

struct alignas(64) SendCard {
    std::atomic<uint64_t> state;  // card_word(); written last by the sender (release)
    int32_t tag;
    uint32_t reserved;
    uint64_t bytes;
    uint64_t buf;       // in the sender's memory
    uint64_t sequence;  // its post's (logs)
};
static_assert(sizeof(SendCard) == 64);

struct alignas(64) PairHeader {
    // The pair's messages that went without a card and the agent has not
    // matched yet, and the card number the sender was at when the first of
    // them went: while the count is not 0, the receiver takes only cards
    // numbered below it (older than every message without one).
    std::atomic<uint64_t> offboard;
    std::atomic<uint64_t> barrier;
};

// The point-to-point lock's holder: a member's rank + 1, or the agent.
inline constexpr uint32_t kP2pLockAgent = UINT32_MAX;

enum BoardOwner : uint32_t { kOwnerNone = 0, kOwnerAgent = 1, kOwnerRanks = 2 };

struct BoardHeader {
    uint64_t magic;
    uint32_t size;
    uint32_t slots;
    // The members claim only operations that write at most this many bytes
    // into any member's destination (the agent's rank_execution_bytes).
    uint64_t max_bytes;
    // Every operation up to this one has finished (its records written).
    alignas(64) std::atomic<uint64_t> completed;
    // Set by the agent when the team breaks (a member left or died): ranks
    // stop claiming and fail what they run.
    alignas(64) std::atomic<uint32_t> broken;
    // Bumped after every change a member may sleep for (a claim, a count
    // reaching the team size, an operation finished, the team broken): the
    // one futex waiting members sleep on.
    alignas(64) std::atomic<uint32_t> epoch;
    std::atomic<uint32_t> sleepers;
    // Set by a member that cannot or will not run operations (its views
    // could not be mapped, or DEPUTY_RANK_EXECUTION=off) before its first
    // post: nobody claims for the ranks then, the agent runs everything.
    alignas(64) std::atomic<uint32_t> agent_only;
    // The last operation the agent took from the members' queues (ran, or
    // found claimed by the members). A member posts operation `seq` only
    // when seq <= agent_started + DP_TEAM_MAX_OUTSTANDING: the members never
    // run so far ahead of the agent that its queues overflow or an
    // operation's slot here is reused before the agent has looked at it.
    alignas(64) std::atomic<uint64_t> agent_started;
    // Who decides point-to-point matches now (0: nobody; kP2pLockAgent, or
    // a member's rank + 1).
    alignas(64) std::atomic<uint32_t> p2p_lock;
    // Set by the agent while it holds posts it could not decide (the lock
    // was taken): the member that unlocks then rings the agent's doorbell.
    std::atomic<uint32_t> p2p_deferred;
};

struct alignas(64) BoardOp {
    std::atomic<uint64_t> claim;    // (seq << 2) | owner
    std::atomic<uint64_t> read;     // (seq << 16) | members done reading sources
    std::atomic<uint64_t> written;  // (seq << 16) | members done writing destinations
};
static_assert(sizeof(BoardOp) == 64);

class TeamBoard {
  public:
    static size_t bytes(uint32_t size);
    // Over mapped memory of bytes(size); the agent initialises it.
    TeamBoard() = default;
    TeamBoard(void *base, uint32_t size) : base_(static_cast<uint8_t *>(base)), size_(size) {}
    void initialise(uint64_t max_bytes);
    bool valid() const { return base_ != nullptr; }
    uint32_t size() const { return size_; }

    BoardHeader &header() const { return *reinterpret_cast<BoardHeader *>(base_); }
    // Claims `seq` for `who` unless someone has; returns the owner.
    BoardOwner claim(uint64_t seq, BoardOwner who) const;
    BoardOwner owner(uint64_t seq) const;
    // The operation `rank` waits for in dp_wait (0: none).
    void set_waiting(uint32_t rank, uint64_t seq) const;
    // Clears `rank`'s mark; returns what it was.
    uint64_t withdraw(uint32_t rank) const;
    uint64_t waiting(uint32_t rank) const;
    // One more member done reading / writing `seq`; returns how many are.
    uint32_t count_read(uint64_t seq) const { return count(op(seq).read, seq); }
    uint32_t count_written(uint64_t seq) const { return count(op(seq).written, seq); }
    uint32_t readers(uint64_t seq) const { return tally(op(seq).read, seq); }
    uint32_t writers(uint64_t seq) const { return tally(op(seq).written, seq); }
    uint64_t completed() const { return header().completed.load(std::memory_order_acquire); }
    // Marks `seq` finished (it follows seq - 1) and wakes sleepers.
    void complete(uint64_t seq) const;
    bool broken() const { return header().broken.load(std::memory_order_acquire) != 0; }
    void set_broken() const;
    // Wakes the members sleeping in sleep() (a futex wake only if any does).
    void notify() const;
    // Sleeps while the epoch is still `seen`, at most timeout_ns.
    void sleep(uint32_t seen, int64_t timeout_ns) const;
    uint32_t epoch() const { return header().epoch.load(std::memory_order_acquire); }

    // Point-to-point cards (the file's comment); none for teams of more
    // than kMaxCardMembers.
    static bool has_cards(uint32_t size) { return size >= 1 && size <= kMaxCardMembers; }
    bool cards() const { return base_ && has_cards(size_); }
    SendCard &send_card(uint32_t from, uint32_t to, uint64_t number) const;
    PairHeader &pair(uint32_t from, uint32_t to) const;
    std::atomic<uint64_t> &recv_word(uint32_t rank, uint32_t slot) const;
    // Never waits: false when someone else decides now. Sequentially
    // consistent, as the agent's p2p_deferred and the members' look at it.
    bool try_lock_p2p(uint32_t who) const;
    void unlock_p2p(uint32_t who) const;

    // A member's copy of its post of `seq` (its `sequence` field set to seq
    // last, so a reader knows the rest is there).
    void write_post(uint32_t rank, uint64_t seq, const CollPost &post) const;
    // The post of `rank` for `seq`, copied once; false when it is not there.
    bool read_post(uint32_t rank, uint64_t seq, CollPost *out) const;

  private:
    BoardOp &op(uint64_t seq) const;
    std::atomic<uint64_t> &waiting_word(uint32_t rank) const;
    CollPost *post_slot(uint32_t rank, uint64_t seq) const;
    uint8_t *cards_base() const;
    static uint32_t count(std::atomic<uint64_t> &word, uint64_t seq);
    static uint32_t tally(const std::atomic<uint64_t> &word, uint64_t seq);

    uint8_t *base_ = nullptr;
    uint32_t size_ = 0;
};

}  // namespace deputy::channel
