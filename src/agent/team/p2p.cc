// Point-to-point messages (p2p.h): each post checked as it arrives and
// matched against what is queued, the bytes of a matched message moved by a
// plan of its own (coll/message_plan.h) on the engines, or on the service
// thread when it is small and every buffer is mapped (the collectives'
// rule, local_execution.cc), and each side's record written when its part
// is done.
#include <fmt/format.h>

#include <algorithm>

#include "agent/team/engine.h"
#include "agent/team/p2p.h"
#include "agent/team/team.h"
#include "coll/message_plan.h"
#include "common/log.h"

namespace deputy::agent {

namespace ch = channel;

namespace {

// A probe that found nothing: its record's `result` (no rank is this).
constexpr uint32_t kNoSource = UINT32_MAX;

bool reachable(const ClientSpace &space, uint64_t addr, uint64_t bytes) {
    return bytes == 0 || space.in_pool(addr, bytes) || space.direct_allows(addr, bytes);
}

}  // namespace

void TeamEngine::publish_p2p(uint32_t client, const ch::P2pPost &p, uint8_t status,
                             uint64_t bytes, uint32_t source, int32_t tag) {
    ClientSession *c = client ? hooks_.find_client(client) : nullptr;
    if (!c) return;
    // Members waiting on a team with cards sleep on its board.
    struct Wake {
        TeamEngine &e;
        uint32_t team;
        ~Wake() {
            if (auto it = e.teams_.find(team); it != e.teams_.end() && it->second->board.cards())
                it->second->board.notify();
        }
    } wake{*this, p.team};
    mover::OpResult result;
    result.status = status;
    result.bytes = bytes;
    result.result = source;
    result.value = uint64_t(uint32_t(tag));
    // In place only: the service thread never calls into a client's process.
    if (!c->space().publish_in_place(p.completion, result, p.sequence))
        DP_LOG_LIMITED(c->space().log(),
                       "client {}: {} completion record 0x{:x} is misaligned or outside its pool "
                       "and shared heap; the result cannot be reported",
                       c->id, ch::p2p_opcode_name(p.opcode), p.completion);
}

void TeamEngine::release_copy(P2pMessage &m) {
    if (!m.copy) return;
    switch (m.copy_of) {
        case P2pMessage::CopyOf::early:
            held_bytes_ -= m.send.bytes;
            --held_messages_;
            break;
        case P2pMessage::CopyOf::node_early:
            return_credit(m.from_node, m.send.bytes + sizeof(InterMessage));
            break;
        case P2pMessage::CopyOf::node_data: staged_bytes_ -= m.send.bytes; break;
    }
    m.copy.reset();
    // Room for a receive waiting to ask for its bytes.
    if (m.copy_of == P2pMessage::CopyOf::node_data) ask_waiting();
}

void TeamEngine::p2p_answered(Team *t, uint32_t rank) {
    if (!t || !t->p2p) return;
    if (P2pQueues::Member *m = t->p2p->at(t->slot_of(rank)); m && m->open) --m->open;
}

void TeamEngine::post_p2p(ClientSession &s, const ch::P2pPost &p) {
    uint32_t rank = 0;
    Team *t = find_member_team(s, p.team, &rank);
    auto refuse = [&](uint8_t status) {
        publish_p2p(s.id, p, status, 0, 0, 0);
        ++p2p_failed_;
    };
    if (!t) {
        // A member that matched its messages itself may have left the team
        // before the agent took its posts (they come through its ring, its
        // leave through its socket): their records are its own, done, and
        // may have been freed since. Nothing is written for a carded post.
        if (p.card && ch::is_p2p_post(p.opcode)) return;
        DP_LOG_LIMITED(s.space().log(), "client {}: {} for team {}, of which it is not a member",
                       s.id, ch::p2p_opcode_name(p.opcode), p.team);
        return refuse(DP_COMP_INVALID_FIELD);
    }
    if (const uint8_t bad = ch::p2p_post_invalid(p, t->size)) {
        DP_LOG_LIMITED(s.space().log(),
                       "client {}: {} on team '{}' (rank {} of {}): peer {}, tag {}, {} bytes: "
                       "{}",
                       s.id, ch::p2p_opcode_name(p.opcode), t->key, rank, t->size, p.peer, p.tag,
                       p.bytes, mover::comp_status_name(bad));
        return refuse(bad);
    }
    if (!reachable(s.space(), p.buf, p.bytes)) {
        DP_LOG_LIMITED(s.space().log(),
                       "client {}: {} on team '{}': buffer [0x{:x}, +{}) is outside its pool and "
                       "registered memory",
                       s.id, ch::p2p_opcode_name(p.opcode), t->key, p.buf, p.bytes);
        return refuse(DP_COMP_ADDRESS_DENIED);
    }
    if (!t->p2p) t->p2p = std::make_unique<P2pQueues>(uint32_t(t->here.size()), t->size);
    P2pQueues &q = *t->p2p;
    P2pQueues::Member &me = *q.at(t->slot_of(rank));  // (the poster: a member here)
    if (p.opcode == ch::kP2pProbe) {
        for (const auto &m : me.arrived)
            if (ch::p2p_accepts(p, m->from, m->send.tag) && !member_took(*t, *m))
                return publish_p2p(s.id, p, DP_COMP_SUCCESS, m->send.bytes, m->from, m->send.tag);
        if (p.peer >= 0 && (on_other_node(*t, uint32_t(p.peer)) ? q.node_gone[uint32_t(p.peer)] != 0
                                                                 : t->client_of(uint32_t(p.peer)) == 0))
            return refuse(ch::kCollMemberLost);
        return publish_p2p(s.id, p, DP_COMP_SUCCESS, 0, kNoSource, 0);
    }
    if (me.open >= DP_P2P_MAX_OUTSTANDING) {
        // The library never posts more (its slots): a client that does is
        // told to post again later, and the agent holds nothing more of it.
        DP_LOG_LIMITED(s.space().log(),
                       "client {}: {} on team '{}': {} of its point-to-point posts are open "
                       "(DP_P2P_MAX_OUTSTANDING)",
                       s.id, ch::p2p_opcode_name(p.opcode), t->key, me.open);
        return refuse(ch::kCollQueueFull);
    }
    ++me.open;
    if (t->board.cards()) {
        // A receiver may be matching itself: the agent decides only under
        // the team's lock, and never waits for it.
        if (q.deferred.empty() && t->board.try_lock_p2p(ch::kP2pLockAgent)) {
            take_p2p(*t, s.id, rank, p);
            t->board.unlock_p2p(ch::kP2pLockAgent);
            return;
        }
        q.deferred.push_back({s.id, rank, p});
        ++p2p_deferred_total_;
        ++p2p_deferred_now_;
        // Said before one more try: a member unlocking after that try
        // sees it and rings (team_board.h).
        t->board.header().p2p_deferred.store(1, std::memory_order_seq_cst);
        take_deferred(*t);
        return;
    }
    take_p2p(*t, s.id, rank, p);
}

void TeamEngine::take_p2p(Team &t, uint32_t client, uint32_t rank, const ch::P2pPost &p) {
    P2pQueues &q = *t.p2p;
    P2pQueues::Member &me = *q.at(t.slot_of(rank));
    auto &arrived = me.arrived;
    const bool cards = t.board.cards();
    auto refuse = [&](uint8_t status) {
        publish_p2p(client, p, status, 0, 0, 0);
        ++p2p_failed_;
        p2p_answered(&t, rank);
    };
    // A member that left or died sends nothing more (a message it sent
    // before is still received); one on another node, when its agent said so.
    auto gone = [&](int32_t rank_or_any) {
        if (rank_or_any < 0) return false;
        const uint32_t r = uint32_t(rank_or_any);
        return on_other_node(t, r) ? q.node_gone[r] != 0 : t.client_of(r) == 0;
    };
    if (p.opcode == ch::kP2pRecv) {
        if (cards && member_took(t, rank, p)) {
            // Its member matched it itself: so it took some message of ours.
            p2p_answered(&t, rank);
            return sweep_taken(t, rank);
        }
        // The first message that arrived which it accepts: MPI's order.
        for (auto it = arrived.begin(); it != arrived.end();) {
            if (cards && member_took(t, **it)) {
                ++p2p_member_copies_;
                p2p_member_copy_bytes_ += (*it)->send.bytes;
                p2p_answered(&t, (*it)->from);
                it = arrived.erase(it);
                continue;
            }
            if (!ch::p2p_accepts(p, (*it)->from, (*it)->send.tag)) {
                ++it;
                continue;
            }
            if (cards && (!claim_receive(t, rank, p) || !claim_message(t, **it))) {
                // Only a member that writes what it should not gets here:
                // the receive stays the agent's to match later.
                me.recvs.push_back(p);
                return;
            }
            std::shared_ptr<P2pMessage> m = std::move(*it);
            arrived.erase(it);
            take_message(t, m, p, client);
            return;
        }
        if (gone(p.peer)) {
            if (cards && !claim_receive(t, rank, p)) return p2p_answered(&t, rank);
            return refuse(ch::kCollMemberLost);
        }
        me.recvs.push_back(p);
        return;
    }
    // A send.
    auto m = std::make_shared<P2pMessage>();
    m->send = p;
    m->from = rank;
    m->to = uint32_t(p.peer);
    m->sender = client;
    if (cards && m->to != rank) {
        if (p.card) {
            m->card = p.card;
            if (member_took(t, *m)) {
                // Its receiver took it already (it may even be done and its
                // card reused): the send completes on its card.
                ++p2p_member_copies_;
                p2p_member_copy_bytes_ += p.bytes;
                p2p_answered(&t, rank);
                return sweep_taken(t, m->to);
            }
        } else {
            m->offboard = true;
        }
    }
    if (gone(p.peer)) {
        if (!claim_message(t, *m)) return p2p_answered(&t, rank);  // it took the bytes first
        return refuse(ch::kCollMemberLost);
    }
    if (on_other_node(t, m->to)) return send_to_node(t, m);
    P2pQueues::Member &to = *q.at(t.slot_of(m->to));  // (a member here)
    auto &recvs = to.recvs;
    for (auto it = recvs.begin(); it != recvs.end();) {
        if (cards && member_took(t, m->to, *it)) {
            p2p_answered(&t, m->to);
            it = recvs.erase(it);
            continue;
        }
        if (!ch::p2p_accepts(*it, rank, p.tag)) {
            ++it;
            continue;
        }
        const ch::P2pPost recv = *it;
        if (cards && !claim_receive(t, m->to, recv)) {
            p2p_answered(&t, m->to);
            it = recvs.erase(it);
            continue;
        }
        if (cards && !claim_message(t, *m)) {
            // Taken under the agent's lock: only a member that writes what
            // it should not; the receive stays queued, the send is its.
            p2p_answered(&t, rank);
            return;
        }
        recvs.erase(it);
        take_message(t, m, recv, t.client_of(m->to));
        return;
    }
    to.arrived.push_back(m);
    // Early and small: copied now within the bounds, so that its send
    // completes; otherwise (or synchronous) it waits for its receive.
    if (!(p.flags & ch::kP2pSynchronous) && p.bytes <= config_.p2p_eager_bytes &&
        held_bytes_ + p.bytes <= config_.p2p_held_bytes &&
        held_messages_ < config_.p2p_held_messages) {
        if (m->card) {
            // Held, the receiver may no longer take it (its bytes move).
            uint64_t posted = ch::card_word(m->card, ch::kCardPosted);
            if (!t.board.send_card(rank, m->to, m->card)
                     .state.compare_exchange_strong(posted, ch::card_word(m->card, ch::kCardHeld),
                                                    std::memory_order_acq_rel))
                return;
        }
        held_bytes_ += p.bytes;
        ++held_messages_;
        ++p2p_held_total_;
        m->copy = std::make_shared<std::vector<uint8_t>>(p.bytes);
        m->holding = true;
        auto x = std::make_unique<Transfer>();
        x->kind = Transfer::Kind::hold;
        x->team = t.id;
        x->message = m;
        start_transfer(t, std::move(x));
    }
}

// A card (or receive word) says posted, held or agent with its own number
// until a member takes it; a sender reuses a card, and a member a receive's
// slot, only once that message or receive is done: another number there
// means a member took it, long ago.
bool TeamEngine::member_took(const Team &t, const P2pMessage &m) const {
    if (!m.card) return false;
    const uint64_t word = t.board.send_card(m.from, m.to, m.card).state.load(std::memory_order_acquire);
    const ch::CardState st = ch::card_state(word);
    return ch::card_number(word) != m.card ||
           (st != ch::kCardPosted && st != ch::kCardHeld && st != ch::kCardAgent);
}

bool TeamEngine::member_took(const Team &t, uint32_t rank, const ch::P2pPost &recv) const {
    if (!recv.card) return false;
    const uint64_t word = t.board.recv_word(rank, uint32_t(recv.card - 1)).load(std::memory_order_acquire);
    return word != ch::card_word(recv.sequence + 1, ch::kCardPosted) &&
           word != ch::card_word(recv.sequence + 1, ch::kCardAgent);
}

bool TeamEngine::claim_message(Team &t, P2pMessage &m) {
    if (m.offboard) {
        // Matched (or failed): the receiver may take this sender's next.
        m.offboard = false;
        std::atomic<uint64_t> &offboard = t.board.pair(m.from, m.to).offboard;
        uint64_t n = offboard.load(std::memory_order_acquire);
        while (n && !offboard.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
        }
        return true;
    }
    if (!m.card) return true;
    std::atomic<uint64_t> &word = t.board.send_card(m.from, m.to, m.card).state;
    for (ch::CardState from : {ch::kCardPosted, ch::kCardHeld}) {
        uint64_t seen = ch::card_word(m.card, from);
        if (word.compare_exchange_strong(seen, ch::card_word(m.card, ch::kCardAgent),
                                         std::memory_order_acq_rel))
            break;
    }
    const bool mine = !member_took(t, m);
    m.card = 0;  // the agent's now (or the member's): never looked at again
    return mine;
}

bool TeamEngine::claim_receive(Team &t, uint32_t rank, const ch::P2pPost &recv) {
    if (!recv.card) return true;
    uint64_t posted = ch::card_word(recv.sequence + 1, ch::kCardPosted);
    t.board.recv_word(rank, uint32_t(recv.card - 1))
        .compare_exchange_strong(posted, ch::card_word(recv.sequence + 1, ch::kCardAgent),
                                 std::memory_order_acq_rel);
    return !member_took(t, rank, recv);
}

void TeamEngine::sweep_taken(Team &t, uint32_t rank) {
    P2pQueues::Member *member = t.p2p ? t.p2p->at(t.slot_of(rank)) : nullptr;
    if (!member) return;
    for (auto it = member->recvs.begin(); it != member->recvs.end();) {
        if (!member_took(t, rank, *it)) {
            ++it;
            continue;
        }
        p2p_answered(&t, rank);
        it = member->recvs.erase(it);
    }
    for (auto it = member->arrived.begin(); it != member->arrived.end();) {
        if (!member_took(t, **it)) {
            ++it;
            continue;
        }
        ++p2p_member_copies_;
        p2p_member_copy_bytes_ += (*it)->send.bytes;
        p2p_answered(&t, (*it)->from);
        it = member->arrived.erase(it);
    }
}

bool TeamEngine::take_deferred(Team &t) {
    if (!t.p2p || t.p2p->deferred.empty() || !t.board.try_lock_p2p(ch::kP2pLockAgent))
        return false;
    std::deque<P2pQueues::Deferred> posts = std::move(t.p2p->deferred);
    t.p2p->deferred.clear();
    p2p_deferred_now_ -= posts.size();
    t.board.header().p2p_deferred.store(0, std::memory_order_relaxed);
    for (const P2pQueues::Deferred &d : posts) take_p2p(t, d.client, d.rank, d.post);
    t.board.unlock_p2p(ch::kP2pLockAgent);
    return true;
}

bool TeamEngine::retry_deferred() {
    bool worked = false;
    for (auto &[id, t] : teams_) worked |= take_deferred(*t);
    return worked;
}

void TeamEngine::take_message(Team &t, const std::shared_ptr<P2pMessage> &m,
                              const ch::P2pPost &recv, uint32_t receiver) {
    if (m->holding) {  // its copy is still being made: delivered when it is
        m->taken = true;
        m->recv = recv;
        m->receiver = receiver;
        return;
    }
    if (m->send.bytes > recv.bytes) {
        // Nothing is written: the receive learns the message's length.
        if (ClientSession *c = hooks_.find_client(receiver))
            DP_LOG_LIMITED(c->space().log(),
                           "client {}: team '{}': a receive of {} bytes took a {}-byte message "
                           "from rank {} (tag {}): truncated",
                           receiver, t.key, recv.bytes, m->send.bytes, m->from, m->send.tag);
        publish_p2p(receiver, recv, ch::kP2pTruncated, m->send.bytes, m->from, m->send.tag);
        ++p2p_failed_;
        p2p_answered(&t, m->to);
        if (m->copy) {
            release_copy(*m);
        } else if (m->from_node != kThisNode) {
            // As under MPI, the send itself completes.
            answer_node_send(*m, ch::kP2pTruncated, 0);
        } else {
            // As under MPI, the send itself completes.
            publish_p2p(m->sender, m->send, DP_COMP_SUCCESS, m->send.bytes, 0, 0);
            p2p_answered(&t, m->from);
        }
        return;
    }
    // Another node's message whose bytes are still there: asked for now.
    if (m->from_node != kThisNode && !m->copy) return ask_for_data(t, m, recv, receiver);
    auto x = std::make_unique<Transfer>();
    x->kind = m->held ? Transfer::Kind::deliver : Transfer::Kind::direct;
    x->team = t.id;
    x->message = m;
    x->recv = recv;
    x->receiver = receiver;
    start_transfer(t, std::move(x));
}

void TeamEngine::start_transfer(Team &t, std::unique_ptr<Transfer> x) {
    P2pMessage &m = *x->message;
    const uint64_t bytes = m.send.bytes;
    x->buffers.members.assign(t.size, {});
    // The members' buffers as their posts named them (checked when the
    // posts arrived), their memory held until the tasks are done.
    auto bind = [&](uint32_t client, uint32_t rank, bool source, uint64_t addr) {
        ClientSession *c = hooks_.find_client(client);
        if (!c) return false;
        MemberBuffers::Member &member = x->buffers.members[rank];
        member.space = &c->space();
        (source ? member.src : member.dst) = addr;
        if (bytes && !c->space().in_pool(addr, bytes)) x->buffers.through_process = true;
        x->memories.push_back(c->memory);
        return true;
    };
    coll::Piece from{coll::Where::source, m.from, 0}, to{coll::Where::destination, m.to, 0};
    bool bound = true;
    switch (x->kind) {
        case Transfer::Kind::direct:
            bound = bind(m.sender, m.from, true, m.send.buf) &&
                    bind(x->receiver, m.to, false, x->recv.buf);
            break;
        case Transfer::Kind::hold:
            bound = bind(m.sender, m.from, true, m.send.buf);
            x->copy = m.copy;
            x->buffers.recv = x->copy->data();
            x->buffers.recv_bytes = x->copy->size();
            to = {coll::Where::agent_recv, 0, 0};
            break;
        case Transfer::Kind::deliver:
            bound = bind(x->receiver, m.to, false, x->recv.buf);
            x->copy = m.copy;
            x->buffers.send = x->copy->data() + m.copy_at;
            x->buffers.send_bytes = bytes;
            from = {coll::Where::agent_send, 0, 0};
            break;
        case Transfer::Kind::outgoing:
            bound = bind(m.sender, m.from, true, m.send.buf);
            x->buffers.recv = x->copy->data() + (x->eager ? sizeof(InterMessage) : 0);
            x->buffers.recv_bytes = bytes;
            to = {coll::Where::agent_recv, 0, 0};
            break;
    }
    if (!bound) return finish_transfer(*x, ch::kCollMemberLost, "a member left");
    x->plan = coll::build_message_plan(
        bytes,
        x->buffers.all_in_place() ? config_.coll_chunk_bytes : config_.coll_direct_chunk_bytes,
        from, to);
    // Small and mapped: cheaper here than the wake-ups of a hand-off.
    if (run_inline(x->plan.traffic_bytes(), x->buffers.all_in_place())) {
        uint8_t status = DP_COMP_SUCCESS;
        std::string why;
        for (const coll::Task &task : x->plan.tasks)
            if ((status = coll::run_task(x->plan, task, x->buffers, &why)) != DP_COMP_SUCCESS)
                break;
        return finish_transfer(*x, status, why);
    }
    x->tasks.reset(&x->plan, {}, 1, &x->buffers);
    x->tasks.enable_all();
    x->tasks.pump(*device_, 0, task_pasid_, window());
    transfers_.push_back(std::move(x));
}

bool TeamEngine::progress_p2p() {
    bool worked = false;
    for (size_t i = 0; i < transfers_.size();) {
        Transfer &x = *transfers_[i];
        x.tasks.poll();
        if (x.tasks.done() || (x.tasks.failed() && x.tasks.idle())) {
            // Out of the list first: finishing may start another transfer.
            std::unique_ptr<Transfer> done = std::move(transfers_[i]);
            transfers_[i] = std::move(transfers_.back());
            transfers_.pop_back();
            finish_transfer(*done, done->tasks.status(), done->tasks.why());
            worked = true;
            continue;
        }
        x.tasks.pump(*device_, 0, task_pasid_, window());
        ++i;
    }
    return worked;
}

void TeamEngine::finish_transfer(Transfer &x, uint8_t status, const std::string &why) {
    P2pMessage &m = *x.message;
    auto it = teams_.find(x.team);
    Team *t = it == teams_.end() ? nullptr : it->second.get();
    const bool ok = status == DP_COMP_SUCCESS;
    if (!ok)
        DP_LOG_WARN("agent: team {}: message of {} bytes from rank {} to rank {} (tag {}): {}{}{}",
                    t ? t->key : std::to_string(x.team), m.send.bytes, m.from, m.to, m.send.tag,
                    ch::coll_status_name(status), why.empty() ? "" : ": ", why);
    auto release = [&] { release_copy(m); };
    switch (x.kind) {
        case Transfer::Kind::direct:
            publish_p2p(m.sender, m.send, status, m.send.bytes, 0, 0);
            publish_p2p(x.receiver, x.recv, status, m.send.bytes, m.from, m.send.tag);
            p2p_answered(t, m.from);
            p2p_answered(t, m.to);
            break;
        case Transfer::Kind::hold:
            m.holding = false;
            publish_p2p(m.sender, m.send, status, m.send.bytes, 0, 0);
            p2p_answered(t, m.from);
            if (!ok) {
                // The message is lost with its send: a receive that took
                // it fails alike; otherwise it leaves the queue.
                release();
                if (t && m.card) claim_message(*t, m);
                if (m.taken) {
                    publish_p2p(m.receiver, m.recv, status, 0, m.from, m.send.tag);
                    p2p_answered(t, m.to);
                } else if (t && t->p2p) {
                    auto &arrived = t->p2p->at(t->slot_of(m.to))->arrived;
                    arrived.erase(std::remove(arrived.begin(), arrived.end(), x.message),
                                  arrived.end());
                }
                break;
            }
            m.held = true;
            if (m.taken) {
                m.taken = false;
                if (t) {
                    take_message(*t, x.message, m.recv, m.receiver);
                } else {
                    release();
                    publish_p2p(m.receiver, m.recv, ch::kCollMemberLost, 0, m.from, m.send.tag);
                }
            } else if (!m.copy) {
                // Its team went meanwhile (drop_p2p): nobody receives it.
            }
            return;
        case Transfer::Kind::deliver:
            release();
            publish_p2p(x.receiver, x.recv, status, m.send.bytes, m.from, m.send.tag);
            p2p_answered(t, m.to);
            break;
        case Transfer::Kind::outgoing:
            publish_p2p(m.sender, m.send, status, m.send.bytes, 0, 0);
            p2p_answered(t, m.from);
            outgoing_done(x, status);
            if (!ok) ++p2p_failed_;
            return;  // counted as moved where it is received
    }
    if (ok) {
        ++p2p_messages_;
        p2p_bytes_ += m.send.bytes;
    } else {
        ++p2p_failed_;
    }
}

void TeamEngine::p2p_member_gone(Team &t, uint32_t rank, uint32_t client) {
    if (!t.p2p) return;
    P2pQueues &q = *t.p2p;
    const bool cards = t.board.cards();
    if (cards) {
        // It may have died deciding a match, or copying one: the lock
        // freed; a send it was copying fails (its sender waits on the card).
        t.board.unlock_p2p(rank + 1);
        for (uint32_t from = 0; from < t.size; ++from)
            for (uint32_t k = 0; k < channel::kPairCards; ++k) {
                std::atomic<uint64_t> &word = t.board.send_card(from, rank, k).state;
                uint64_t seen = word.load(std::memory_order_acquire);
                if (ch::card_state(seen) == ch::kCardTaken)
                    word.compare_exchange_strong(
                        seen, ch::card_word(ch::card_number(seen), ch::kCardLost),
                        std::memory_order_acq_rel);
            }
        // Its posts the agent has not taken yet go with it.
        const size_t before = q.deferred.size();
        std::erase_if(q.deferred, [&](const P2pQueues::Deferred &d) { return d.rank == rank; });
        p2p_deferred_now_ -= before - q.deferred.size();
    }
    auto fail = [&](uint32_t to_client, const ch::P2pPost &post, uint32_t of_rank) {
        publish_p2p(to_client, post, ch::kCollMemberLost, 0, 0, 0);
        p2p_answered(&t, of_rank);
        ++p2p_failed_;
    };
    // Its own receives: nobody is there to take a message any more.
    // (A member of another node has none here.)
    if (P2pQueues::Member *gone = q.at(t.slot_of(rank))) {
        for (const ch::P2pPost &recv : gone->recvs) fail(client, recv, rank);
        gone->recvs.clear();
        // Messages for it: copies dropped (a copy still being made is its
        // transfer's too), senders still waiting told.
        for (const auto &m : gone->arrived) {
            if (m->copy) {
                release_copy(*m);
            } else if (!cards || claim_message(t, *m)) {
                fail(m->sender, m->send, m->from);
            } else {
                p2p_answered(&t, m->from);  // taken: its card says lost
            }
        }
        gone->arrived.clear();
    }
    for (size_t i = 0; i < q.members.size(); ++i) {
        const uint32_t r = t.local_ranks[i];
        if (r == rank) continue;
        // Its sends that wait for a receive: their bytes will not be there
        // (a copy the agent holds stays, for the receive that comes).
        auto &arrived = q.members[i].arrived;
        for (auto it = arrived.begin(); it != arrived.end();) {
            if ((*it)->from != rank || (*it)->copy) {
                ++it;
                continue;
            }
            // One its receiver took is the receiver's (its views stay).
            if (!cards || claim_message(t, **it)) fail(client, (*it)->send, rank);
            it = arrived.erase(it);
        }
        // Receives that name it: no message of it waits (one that arrived
        // was matched then), and none will come.
        auto &recvs = q.members[i].recvs;
        for (auto it = recvs.begin(); it != recvs.end();) {
            if (it->peer != int32_t(rank)) {
                ++it;
                continue;
            }
            if (!cards || claim_receive(t, r, *it)) {
                fail(t.client_of(r), *it, r);
            } else {
                p2p_answered(&t, r);  // its member matched it itself
            }
            it = recvs.erase(it);
        }
    }
    if (t.spans_nodes) node_member_gone(t, rank);
}

void TeamEngine::drop_p2p(Team &t) {
    if (!t.p2p) return;
    p2p_deferred_now_ -= t.p2p->deferred.size();
    for (auto &member : t.p2p->members)
        for (const auto &m : member.arrived) release_copy(*m);  // (one being made is its transfer's too)
    if (t.spans_nodes) drop_node_p2p(t);
    t.p2p.reset();
}

}  // namespace deputy::agent
