#include "channel/team_board.h"

#include <deputy/coll.h>

#include <cstring>

#include "common/futex.h"

namespace deputy::channel {

namespace {
constexpr size_t kWaitingOffset = 4096;
static_assert(sizeof(BoardHeader) <= kWaitingOffset);
constexpr size_t kOpsBytes = sizeof(BoardOp) * kBoardSlots;
constexpr uint64_t kCountMask = 0xffff;
static_assert(kMaxBoardMembers < kCountMask, "a member count fits the read/written words");

// The header page, then a 64-byte waiting word per member (a page or more),
// then the operation slots and the posts.
size_t ops_offset(uint32_t size) {
    return kWaitingOffset + (64 * size_t(size) + 4095) / 4096 * 4096;
}

size_t posts_end(uint32_t size) {
    return ops_offset(size) + kOpsBytes + size_t(size) * kBoardSlots * sizeof(CollPost);
}
constexpr size_t kRecvWordsBytes = DP_P2P_MAX_OUTSTANDING * sizeof(uint64_t);
constexpr size_t kPairBytes = sizeof(PairHeader) + kPairCards * sizeof(SendCard);
static_assert(sizeof(PairHeader) == 64);
}  // namespace

size_t TeamBoard::bytes(uint32_t size) {
    size_t n = posts_end(size);
    if (has_cards(size))
        n += size_t(size) * kRecvWordsBytes + size_t(size) * size * kPairBytes;
    return (n + 4095) / 4096 * 4096;  // a segment's size, as members check it
}

void TeamBoard::initialise(uint64_t max_bytes) {
    std::memset(base_, 0, bytes(size_));
    BoardHeader &h = header();
    h.max_bytes = max_bytes;
    h.magic = kBoardMagic;
    h.size = size_;
    h.slots = kBoardSlots;
}

uint8_t *TeamBoard::cards_base() const { return base_ + posts_end(size_); }

std::atomic<uint64_t> &TeamBoard::recv_word(uint32_t rank, uint32_t slot) const {
    auto *words = reinterpret_cast<std::atomic<uint64_t> *>(cards_base());
    return words[size_t(rank) * DP_P2P_MAX_OUTSTANDING + slot % DP_P2P_MAX_OUTSTANDING];
}

PairHeader &TeamBoard::pair(uint32_t from, uint32_t to) const {
    uint8_t *pairs = cards_base() + size_t(size_) * kRecvWordsBytes;
    return *reinterpret_cast<PairHeader *>(pairs + (size_t(from) * size_ + to) * kPairBytes);
}

SendCard &TeamBoard::send_card(uint32_t from, uint32_t to, uint64_t number) const {
    auto *cards = reinterpret_cast<SendCard *>(&pair(from, to) + 1);
    return cards[number % kPairCards];
}

bool TeamBoard::try_lock_p2p(uint32_t who) const {
    uint32_t free = 0;
    return header().p2p_lock.compare_exchange_strong(free, who, std::memory_order_seq_cst);
}

void TeamBoard::unlock_p2p(uint32_t who) const {
    uint32_t held = who;
    header().p2p_lock.compare_exchange_strong(held, 0, std::memory_order_seq_cst);
}

BoardOp &TeamBoard::op(uint64_t seq) const {
    return reinterpret_cast<BoardOp *>(base_ + ops_offset(size_))[seq % kBoardSlots];
}

CollPost *TeamBoard::post_slot(uint32_t rank, uint64_t seq) const {
    auto *posts = reinterpret_cast<CollPost *>(base_ + ops_offset(size_) + kOpsBytes);
    return &posts[size_t(rank) * kBoardSlots + seq % kBoardSlots];
}

std::atomic<uint64_t> &TeamBoard::waiting_word(uint32_t rank) const {
    return *reinterpret_cast<std::atomic<uint64_t> *>(base_ + kWaitingOffset + 64 * size_t(rank));
}

void TeamBoard::set_waiting(uint32_t rank, uint64_t seq) const {
    waiting_word(rank).store(seq, std::memory_order_seq_cst);
    if (seq) notify();  // a member that found us not waiting looks again
}

uint64_t TeamBoard::withdraw(uint32_t rank) const {
    return waiting_word(rank).exchange(0, std::memory_order_seq_cst);
}

uint64_t TeamBoard::waiting(uint32_t rank) const {
    return rank < size_ ? waiting_word(rank).load(std::memory_order_seq_cst) : 0;
}

BoardOwner TeamBoard::claim(uint64_t seq, BoardOwner who) const {
    std::atomic<uint64_t> &word = op(seq).claim;
    uint64_t seen = word.load(std::memory_order_acquire);
    for (;;) {
        if ((seen >> 2) == seq) return BoardOwner(seen & 3);
        // A slot still naming an older operation is free for this one.
        // A later operation's claim here cannot be honest (the slot is
        // reused only once this one finished): nobody's.
        if ((seen >> 2) > seq) return kOwnerNone;
        if (word.compare_exchange_weak(seen, (seq << 2) | who, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
            return who;
    }
}

BoardOwner TeamBoard::owner(uint64_t seq) const {
    const uint64_t seen = op(seq).claim.load(std::memory_order_acquire);
    return (seen >> 2) == seq ? BoardOwner(seen & 3) : kOwnerNone;
}

uint32_t TeamBoard::count(std::atomic<uint64_t> &word, uint64_t seq) {
    uint64_t seen = word.load(std::memory_order_acquire);
    for (;;) {
        const uint64_t had = (seen >> 16) == seq ? (seen & kCountMask) : 0;
        if (had == kCountMask) return uint32_t(had);  // (a member counting twice: it stays)
        if (word.compare_exchange_weak(seen, (seq << 16) | (had + 1), std::memory_order_acq_rel,
                                       std::memory_order_acquire))
            return uint32_t(had + 1);
    }
}

uint32_t TeamBoard::tally(const std::atomic<uint64_t> &word, uint64_t seq) {
    const uint64_t seen = word.load(std::memory_order_acquire);
    return (seen >> 16) == seq ? uint32_t(seen & kCountMask) : 0;
}

void TeamBoard::complete(uint64_t seq) const {
    uint64_t seen = header().completed.load(std::memory_order_acquire);
    while (seen < seq && !header().completed.compare_exchange_weak(
                             seen, seq, std::memory_order_acq_rel, std::memory_order_acquire)) {
    }
    notify();
}

void TeamBoard::set_broken() const {
    header().broken.store(1, std::memory_order_release);
    notify();
}

void TeamBoard::notify() const {
    BoardHeader &h = header();
    h.epoch.fetch_add(1, std::memory_order_seq_cst);
    // Pairs with sleep(): a sleeper counts itself before it re-reads the epoch.
    if (h.sleepers.load(std::memory_order_seq_cst) != 0)
        futex_wake(reinterpret_cast<uint32_t *>(&h.epoch), INT32_MAX);
}

void TeamBoard::sleep(uint32_t seen, int64_t timeout_ns) const {
    BoardHeader &h = header();
    h.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (h.epoch.load(std::memory_order_seq_cst) == seen)
        futex_wait(reinterpret_cast<uint32_t *>(&h.epoch), seen, timeout_ns);
    h.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void TeamBoard::write_post(uint32_t rank, uint64_t seq, const CollPost &post) const {
    CollPost *slot = post_slot(rank, seq);
    CollPost copy = post;
    copy.sequence = 0;
    // The sequence last (release): whoever sees it sees the rest.
    __atomic_store_n(&slot->sequence, 0, __ATOMIC_RELAXED);
    std::memcpy(slot, &copy, offsetof(CollPost, sequence));
    slot->counts = post.counts;
    __atomic_store_n(&slot->sequence, seq, __ATOMIC_RELEASE);
}

bool TeamBoard::read_post(uint32_t rank, uint64_t seq, CollPost *out) const {
    if (rank >= size_) return false;
    CollPost *slot = post_slot(rank, seq);
    if (__atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE) != seq) return false;
    // Copied once; the copy is what gets checked and used. (An honest
    // member writes a slot again only 128 operations later; one that
    // rewrites it meanwhile only spoils its own team's operation, which
    // the checks of the copy then refuse or run as copied.)
    std::memcpy(out, slot, sizeof(*out));
    return out->sequence == seq;
}

}  // namespace deputy::channel
