#include "client/p2p.h"

#include <algorithm>
#include <bit>
#include <cstring>


#include "common/check.h"
#include "common/timing.h"
#include "common/log.h"

namespace deputy::client {

namespace {

// A probe that found nothing answers with this source (agent/team/p2p.cc).
constexpr uint32_t kNoSource = UINT32_MAX;
// Memory mode rdma: a message below this travels staged (its bytes in the
// post and the answer) instead of being exposed for RMA: exposing it and
// the proxy's RMA round trip cost more than the bytes (osu_latency through
// a remote agent: 182 us a byte by RMA against 108 staged; even at 16 KiB;
// RMA twice as fast at 64 KiB; docs/PERFORMANCE.md, "Point-to-point
// through a remote agent").
constexpr uint64_t kRdmaFromBytes = 16 << 10;
// Messages up to this long in memory neither the agent nor the teammates
// reach in place go through the pool (libdeputy-mpi puts every buffer of
// 64 KiB or more in the shared heap, which they reach).
constexpr uint64_t kBounceMaxBytes = 64 << 10;

const char *name_of(uint8_t opcode) {
    return opcode == channel::kP2pSend ? "dp_isend" : opcode == channel::kP2pRecv ? "dp_irecv"
                                                                                  : "dp_iprobe";
}

}  // namespace

void message_status(const dp_completion_t &record, dp_msg_status_t *status) {
    status->source = int(record.result);
    status->tag = int(uint32_t(record.value));
    status->bytes = size_t(record.bytes_completed);
}

dp_status_t TeamP2p::create(Team *team, std::unique_ptr<TeamP2p> *out) {
    std::unique_ptr<TeamP2p> p(new TeamP2p());
    p->team_ = team;
    p->ctx_ = team->context();
    p->records_ = static_cast<dp_completion_t *>(
        p->ctx_->pool().allocate(sizeof(dp_completion_t) * DP_P2P_MAX_OUTSTANDING));
    if (!p->records_)
        DP_FAIL(DP_ERR_NOMEM,
                "deputy point-to-point: no room for {} completion records ({} bytes) in the "
                "mapped pool ({} bytes free); raise dp_config_t.pool_bytes or the agent's "
                "pool_bytes",
                DP_P2P_MAX_OUTSTANDING, sizeof(dp_completion_t) * DP_P2P_MAX_OUTSTANDING,
                p->ctx_->pool().free_bytes());
    p->slots_.reset(new Request[DP_P2P_MAX_OUTSTANDING]);
    for (uint32_t i = 0; i < DP_P2P_MAX_OUTSTANDING; ++i) {
        Request &r = p->slots_[i];
        r.team = team;
        r.record = &p->records_[i];
        r.slot = i;
        r.p2p = true;
    }
    for (auto &w : p->free_) w.store(~uint64_t(0), std::memory_order_relaxed);
    *out = std::move(p);
    return DP_OK;
}

TeamP2p::~TeamP2p() {
    if (records_) ctx_->pool().release(records_);
}

dp_status_t TeamP2p::push(Request &r, const channel::P2pPost &post) {
    // A remote member's messages go to its team proxy, after the link's
    // collective slots (remote_member.h).
    if (RemoteMember *remote = team_->remote()) [[unlikely]]
        return remote->post(r, DP_TEAM_MAX_OUTSTANDING + r.slot, &post, nullptr, 0);
    dp_desc_t slot_bytes;
    std::memcpy(&slot_bytes, &post, sizeof(slot_bytes));
    return ctx_->push(slot_bytes, true);
}

bool TeamP2p::take_slot(uint32_t *slot) {
    for (uint32_t w = 0; w < kWords; ++w) {
        uint64_t free = free_[w].load(std::memory_order_relaxed);
        while (free != 0) {
            const uint32_t lowest = uint32_t(std::countr_zero(free));
            // Acquire pairs with release(): the slot's last user is done.
            if (free_[w].compare_exchange_weak(free, free & ~(uint64_t(1) << lowest),
                                               std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
                *slot = w * 64 + lowest;
                return true;
            }
        }
    }
    return false;
}

void TeamP2p::release(Request *req) {
    if (req->staged.active()) [[unlikely]]
        stage_release(ctx_->pool(), &req->staged);
    if (req->card) {
        std::lock_guard<std::mutex> lock(cards_mutex_);
        if (req->p2p_opcode == channel::kP2pSend) {
            const uint32_t to = uint32_t(req->p2p_post.peer);
            Request *&owner = card_owner_[size_t(to) * channel::kPairCards +
                                          req->card % channel::kPairCards];
            if (owner == req) owner = nullptr;
        } else {
            auto it = std::find(recv_order_.begin(), recv_order_.end(), req);
            if (it != recv_order_.end()) {
                if (!done(req)) stop_taking_ = true;
                recv_order_.erase(it);
            }
        }
        req->card = 0;
    }
    free_[req->slot / 64].fetch_or(uint64_t(1) << (req->slot % 64), std::memory_order_release);
}

const channel::TeamBoard *TeamP2p::cards() const {
    const RankExecution *ranks = team_->ranks();
    return ranks && ranks->board().cards() ? &ranks->board() : nullptr;
}

dp_status_t TeamP2p::push_carded(const channel::TeamBoard &board, Request &r,
                                 channel::P2pPost &post) {
    namespace ch = channel;
    std::lock_guard<std::mutex> lock(cards_mutex_);
    if (sent_.empty()) {
        sent_.assign(size_t(team_->size()), 0);
        card_owner_.assign(size_t(team_->size()) * ch::kPairCards, nullptr);
    }
    const uint32_t me = uint32_t(team_->rank());
    // Numbered here, under the lock: the ring's order is the cards' order.
    post.sequence = sequence_.fetch_add(1, std::memory_order_relaxed);
    r.sequence = post.sequence + 1;
    ch::SendCard *card = nullptr;
    uint64_t number = 0;
    bool offboard = false;
    if (post.opcode == ch::kP2pSend) {
        const uint32_t to = uint32_t(post.peer);
        number = sent_[to] + 1;
        card = &board.send_card(me, to, number);
        Request *&owner = card_owner_[size_t(to) * ch::kPairCards + number % ch::kPairCards];
        const ch::CardState st = ch::card_state(card->state.load(std::memory_order_acquire));
        if (!owner && (st == ch::kCardEmpty || st == ch::kCardAgent || st == ch::kCardDone)) {
            __atomic_store_n(&card->tag, post.tag, __ATOMIC_RELAXED);
            __atomic_store_n(&card->bytes, post.bytes, __ATOMIC_RELAXED);
            __atomic_store_n(&card->buf, post.buf, __ATOMIC_RELAXED);
            __atomic_store_n(&card->sequence, post.sequence, __ATOMIC_RELAXED);
            card->state.store(ch::card_word(number, ch::kCardPosted), std::memory_order_release);
            sent_[to] = number;
            owner = &r;
            r.card = number;
            post.card = number;
        } else {
            // Every card of the pair is in use: this one goes without, and
            // the receiver takes none of ours until the agent matched it.
            ch::PairHeader &pair = board.pair(me, to);
            // Only this member raises the count: 0 here stays 0 until then.
            if (pair.offboard.load(std::memory_order_acquire) == 0)
                pair.barrier.store(number, std::memory_order_relaxed);
            pair.offboard.fetch_add(1, std::memory_order_acq_rel);
            offboard = true;
            card = nullptr;
        }
    } else {
        r.card = post.sequence + 1;
        post.card = r.slot + 1;
        board.recv_word(me, r.slot).store(ch::card_word(r.card, ch::kCardPosted),
                                          std::memory_order_release);
    }
    r.p2p_post = post;
    const dp_status_t s = push(r, post);
    if (s != DP_OK) [[unlikely]] {
        if (card) {
            // Back, unless the receiver took it meanwhile: then it went.
            uint64_t posted = ch::card_word(number, ch::kCardPosted);
            if (!card->state.compare_exchange_strong(posted, ch::card_word(number, ch::kCardAgent),
                                                     std::memory_order_acq_rel))
                return DP_OK;
            card_owner_[size_t(post.peer) * ch::kPairCards + number % ch::kPairCards] = nullptr;
        } else if (offboard) {
            board.pair(me, uint32_t(post.peer)).offboard.fetch_sub(1, std::memory_order_acq_rel);
        } else if (post.opcode == ch::kP2pRecv) {
            board.recv_word(me, r.slot).store(0, std::memory_order_release);
        }
        r.card = 0;
        return s;
    }
    if (post.opcode == ch::kP2pRecv) recv_order_.push_back(&r);
    // A teammate asleep in its wait looks again.
    board.notify();
    return DP_OK;
}

namespace {

// A record this member completes itself: its fields, then its status
// (release), as the agent publishes one.
void complete_record(dp_completion_t *record, uint64_t bytes, uint32_t result, uint64_t value,
                     uint8_t status) {
    record->bytes_completed = bytes;
    record->result = result;
    record->value = value;
    __atomic_store_n(&record->status, status, __ATOMIC_RELEASE);
}

}  // namespace

bool TeamP2p::done(Request *req) const {
    return __atomic_load_n(&req->record->status, __ATOMIC_ACQUIRE) != DP_COMP_PENDING;
}

bool TeamP2p::send_taken(Request *req) {
    namespace ch = channel;
    const ch::TeamBoard *board = cards();
    if (!board || !req->card || req->p2p_opcode != ch::kP2pSend) return false;
    const uint32_t to = uint32_t(req->p2p_post.peer);
    const ch::SendCard &card = board->send_card(uint32_t(team_->rank()), to, req->card);
    const uint64_t word = card.state.load(std::memory_order_acquire);
    if (word == ch::card_word(req->card, ch::kCardDone)) {
        complete_record(req->record, req->p2p_post.bytes, 0, 0, DP_COMP_SUCCESS);
        return true;
    }
    if (word == ch::card_word(req->card, ch::kCardLost)) {  // (the agent's word for it)
        complete_record(req->record, 0, 0, 0, ch::kCollMemberLost);
        return true;
    }
    return false;
}

bool TeamP2p::take_message() {
    namespace ch = channel;
    const ch::TeamBoard *board = cards();
    if (!board) return false;
    std::unique_lock<std::mutex> lock(cards_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || stop_taking_) return false;
    if (board->header().agent_only.load(std::memory_order_acquire) || board->broken())
        return false;
    const uint32_t me = uint32_t(team_->rank());
    // The oldest receive nobody matched; those before it are matched.
    Request *recv = nullptr;
    while (!recv_order_.empty()) {
        Request *r = recv_order_.front();
        if (!done(r) && board->recv_word(me, r->slot).load(std::memory_order_acquire) ==
                            ch::card_word(r->card, ch::kCardPosted)) {
            recv = r;
            break;
        }
        recv_order_.pop_front();
    }
    if (!recv || !board->try_lock_p2p(me + 1)) return false;
    const ch::P2pPost want = recv->p2p_post;
    const RankExecution &ranks = *team_->ranks();
    struct Found {
        ch::SendCard *card = nullptr;
        uint64_t number = UINT64_MAX, bytes = 0, buf = 0;
        int32_t tag = 0;
        bool held = false;
    };
    // The sender's oldest message this receive accepts, if the receiver
    // may take it: on a card (no older one without), not held by the
    // agent, not longer than the receive (the agent reports that), and in
    // memory this member's views reach.
    auto oldest = [&](uint32_t from, Found *found) {
        if (from == me) return false;
        // Cards from the first message without one on are younger than it.
        const ch::PairHeader &pair = board->pair(from, me);
        const uint64_t below = pair.offboard.load(std::memory_order_acquire) != 0
                                   ? pair.barrier.load(std::memory_order_relaxed)
                                   : UINT64_MAX;
        Found best;
        for (uint32_t k = 0; k < ch::kPairCards; ++k) {
            ch::SendCard &card = board->send_card(from, me, k);
            const uint64_t word = card.state.load(std::memory_order_acquire);
            const ch::CardState st = ch::card_state(word);
            if (st != ch::kCardPosted && st != ch::kCardHeld) continue;
            // Acquire loads keep the second look at the word after them (a
            // fence would too, but ThreadSanitizer builds refuse fences).
            Found f{&card, ch::card_number(word), __atomic_load_n(&card.bytes, __ATOMIC_ACQUIRE),
                    __atomic_load_n(&card.buf, __ATOMIC_ACQUIRE),
                    __atomic_load_n(&card.tag, __ATOMIC_ACQUIRE), st == ch::kCardHeld};
            // The fields are those of this number only if the word did not
            // change meanwhile (a card is rewritten only once it is free).
            if (card.state.load(std::memory_order_relaxed) != word) continue;
            if (!ch::p2p_accepts(want, from, f.tag) || f.number >= best.number) continue;
            best = f;
        }
        if (best.number >= below) return false;
        if (!best.card || best.held || best.bytes > want.bytes ||
            (best.bytes && !ranks.view_of(from, best.buf, best.bytes)))
            return false;
        // Into this member's pool or heap only: memory the agent takes for
        // the receive too, so it never refuses one that completed here.
        if (best.bytes && !ranks.view_of(me, want.buf, best.bytes)) return false;
        *found = best;
        return true;
    };
    Found found;
    uint32_t from = 0;
    bool any = false;
    const uint32_t size = uint32_t(team_->size());
    if (want.peer >= 0) {
        from = uint32_t(want.peer);
        any = from < size && oldest(from, &found);
    } else {
        for (uint32_t i = 0; i < size && !any; ++i) {
            from = (next_source_ + i) % size;
            any = oldest(from, &found);
        }
    }
    // Both claimed, or neither.
    uint64_t posted = ch::card_word(found.number, ch::kCardPosted);
    if (any && !found.card->state.compare_exchange_strong(
                   posted, ch::card_word(found.number, ch::kCardTaken), std::memory_order_acq_rel))
        any = false;
    if (any) {
        uint64_t open = ch::card_word(recv->card, ch::kCardPosted);
        if (!board->recv_word(me, recv->slot)
                 .compare_exchange_strong(open, ch::card_word(recv->card, ch::kCardTaken),
                                          std::memory_order_acq_rel)) {
            found.card->state.store(ch::card_word(found.number, ch::kCardPosted),
                                    std::memory_order_release);
            any = false;
        }
    }
    board->unlock_p2p(me + 1);
    // The agent found the lock taken and holds posts until it gets it.
    if (board->header().p2p_deferred.load(std::memory_order_seq_cst))
        ctx_->ring_doorbell_if_sleeping();
    if (!any) return false;
    recv_order_.pop_front();
    next_source_ = from + 1;
    lock.unlock();
    if (found.bytes)
        std::memcpy(reinterpret_cast<void *>(want.buf), ranks.view_of(from, found.buf, found.bytes),
                    found.bytes);
    found.card->state.store(ch::card_word(found.number, ch::kCardDone), std::memory_order_release);
    complete_record(recv->record, found.bytes, from, uint64_t(uint32_t(found.tag)), DP_COMP_SUCCESS);
    board->notify();
    return true;
}

void TeamP2p::progress(Request *req) {
    if (done(req) || send_taken(req)) return;
    take_message();
}

dp_status_t TeamP2p::wait(Request *req) {
    const channel::TeamBoard *board = cards();
    if (!board) return ctx_->wait_record(req->record, DP_WAIT_DEFAULT, -1, req->yield_first);
    // Every card posted or copied and every record the agent writes for the
    // team's messages bumps the board.
    const uint64_t start = timing::now_ns();
    for (;;) {
        const uint32_t seen = board->epoch();
        if (done(req) || send_taken(req)) return DP_OK;
        // Whichever receive is oldest: taking it may be what our partner
        // waits for before it takes our send.
        if (take_message()) continue;
        DP_CHECK(board_wait_turn(ctx_, *board, seen, start, req->yield_first));
    }
}

dp_status_t TeamP2p::post(uint8_t opcode, uint8_t flags, const void *buf, uint64_t bytes,
                          int peer, int tag, Request **req) {
    *req = nullptr;
    uint32_t slot;
    if (!take_slot(&slot)) [[unlikely]]
        DP_FAIL(DP_ERR_TOO_LARGE,
                "{}: {} point-to-point requests outstanding on this team (the limit, "
                "DP_P2P_MAX_OUTSTANDING); complete and free some first",
                name_of(opcode), DP_P2P_MAX_OUTSTANDING);
    Request &r = slots_[slot];
    *r.record = dp_completion_t{};
    const dp_memory_mode_t mode = ctx_->options().memory_mode;
    // A message to itself stays the agent's.
    const channel::TeamBoard *board = cards();
    const bool carded = board && !(opcode == channel::kP2pSend && peer == team_->rank());
    const bool staged =
        bytes && (mode == DP_MEMORY_STAGED || (mode == DP_MEMORY_RDMA && bytes < kRdmaFromBytes));
    // A small message in memory that is not reached in place (registered
    // ordinary memory: a program's small buffers under libdeputy-mpi) goes
    // through the pool, as MPI's shared memory copies it through its own:
    // there a waiting receiver can take it off the cards, and the agent's
    // service thread copies it itself instead of handing it to an engine
    // (with the agent on a core of its own, an exchange of 1-32 KiB with the
    // ranks computing took 0.34-0.40x the time: docs/decisions/2026-11-30-
    // one-cpu-agent-threads.md). When the pool has no room, it stays where
    // it is, the agent's to move.
    const bool through_pool = !staged && !ctx_->remote() && bytes &&
                              bytes <= kBounceMaxBytes && !ctx_->mapped(buf, bytes);
    if (staged || through_pool) [[unlikely]] {
        // A bounce block in the pool: the send's bytes copied in now, a
        // receive's copied out when its wait first sees it done.
        void *bounce = ctx_->pool().allocate(bytes);
        if (!bounce && through_pool) {
            // (as it is)
        } else if (!bounce) {
            release(&r);
            DP_FAIL(DP_ERR_NOMEM,
                    "{}: no {}-byte bounce buffer in the mapped pool ({} bytes free; staged "
                    "memory mode: every message in flight holds one until it completes; "
                    "complete some, raise dp_config_t.pool_bytes, or use memory mode rdma "
                    "with a remote agent)",
                    name_of(opcode), bytes, ctx_->pool().free_bytes());
        } else {
            r.staged.bounce = bounce;
            r.staged.block_bytes = bytes;
            if (opcode == channel::kP2pSend) {
                std::memcpy(bounce, buf, bytes);
                r.staged.in_bytes = bytes;
            } else {
                r.staged.user_out = static_cast<uint8_t *>(const_cast<void *>(buf));
                r.staged.bounce_out = static_cast<const uint8_t *>(bounce);
                r.staged.out_bytes = bytes;  // at most: request_result trims it to the message
            }
            buf = bounce;
        }
    }
    channel::P2pPost post{};
    post.opcode = opcode;
    post.flags = flags;
    post.team = team_->id();
    post.completion = reinterpret_cast<uint64_t>(r.record);
    post.buf = reinterpret_cast<uint64_t>(buf);
    post.bytes = bytes;
    post.peer = peer;
    post.tag = tag;
    r.p2p_opcode = opcode;
    r.yield_first = bytes <= kYieldFirstMaxBytes;
    r.card = 0;
    dp_status_t s;
    if (carded) {
        s = push_carded(*board, r, post);
    } else {
        post.sequence = sequence_.fetch_add(1, std::memory_order_relaxed);
        r.sequence = post.sequence + 1;
        s = push(r, post);
    }
    if (s != DP_OK) [[unlikely]] {
        release(&r);
        return s;
    }
    *req = &r;
    return DP_OK;
}

dp_status_t TeamP2p::probe(int source, int tag, int *flag, dp_msg_status_t *status) {
    uint32_t slot;
    if (!take_slot(&slot))
        DP_FAIL(DP_ERR_TOO_LARGE,
                "dp_iprobe: {} point-to-point requests outstanding on this team (the limit, "
                "DP_P2P_MAX_OUTSTANDING); complete and free some first",
                DP_P2P_MAX_OUTSTANDING);
    Request &r = slots_[slot];
    *r.record = dp_completion_t{};
    channel::P2pPost post{};
    post.opcode = channel::kP2pProbe;
    post.team = team_->id();
    post.completion = reinterpret_cast<uint64_t>(r.record);
    post.peer = source;
    post.tag = tag;
    post.sequence = sequence_.fetch_add(1, std::memory_order_relaxed);
    dp_status_t s = push(r, post);
    // An answer, not work: the agent writes it as it takes the post.
    if (s == DP_OK) s = ctx_->wait_record(r.record, DP_WAIT_DEFAULT, -1, true);
    if (s == DP_OK) s = coll_status(__atomic_load_n(&r.record->status, __ATOMIC_ACQUIRE));
    if (s == DP_OK) {
        *flag = r.record->result != kNoSource;
        if (*flag && status) message_status(*r.record, status);
    }
    release(&r);
    return s;
}

}  // namespace deputy::client
