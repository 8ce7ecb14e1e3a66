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
    auto &arrived = me.arrived;
    // A member that left or died sends nothing more (a message it sent
    // before is still received); one on another node, when its agent said so.
    auto gone = [&](int32_t rank_or_any) {
        if (rank_or_any < 0) return false;
        const uint32_t r = uint32_t(rank_or_any);
        return on_other_node(*t, r) ? q.node_gone[r] != 0 : t->client_of(r) == 0;
    };
    if (p.opcode == ch::kP2pProbe) {
        for (const auto &m : arrived)
            if (ch::p2p_accepts(p, m->from, m->send.tag))
                return publish_p2p(s.id, p, DP_COMP_SUCCESS, m->send.bytes, m->from, m->send.tag);
        if (gone(p.peer)) return refuse(ch::kCollMemberLost);
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
    if (p.opcode == ch::kP2pRecv) {
        // The first message that arrived which it accepts: MPI's order.
        for (auto it = arrived.begin(); it != arrived.end(); ++it) {
            if (!ch::p2p_accepts(p, (*it)->from, (*it)->send.tag)) continue;
            std::shared_ptr<P2pMessage> m = std::move(*it);
            arrived.erase(it);
            ++me.open;
            take_message(*t, m, p, s.id);
            return;
        }
        if (gone(p.peer)) return refuse(ch::kCollMemberLost);
        ++me.open;
        me.recvs.push_back(p);
        return;
    }
    // A send.
    if (gone(p.peer)) return refuse(ch::kCollMemberLost);
    ++me.open;
    auto m = std::make_shared<P2pMessage>();
    m->send = p;
    m->from = rank;
    m->to = uint32_t(p.peer);
    m->sender = s.id;
    if (on_other_node(*t, m->to)) return send_to_node(*t, m);
    P2pQueues::Member &to = *q.at(t->slot_of(m->to));  // (a member here)
    auto &recvs = to.recvs;
    for (auto it = recvs.begin(); it != recvs.end(); ++it) {
        if (!ch::p2p_accepts(*it, rank, p.tag)) continue;
        const ch::P2pPost recv = *it;
        recvs.erase(it);
        take_message(*t, m, recv, t->client_of(m->to));
        return;
    }
    to.arrived.push_back(m);
    // Early and small: copied now within the bounds, so that its send
    // completes; otherwise (or synchronous) it waits for its receive.
    if (!(p.flags & ch::kP2pSynchronous) && p.bytes <= config_.p2p_eager_bytes &&
        held_bytes_ + p.bytes <= config_.p2p_held_bytes &&
        held_messages_ < config_.p2p_held_messages) {
        held_bytes_ += p.bytes;
        ++held_messages_;
        ++p2p_held_total_;
        m->copy = std::make_shared<std::vector<uint8_t>>(p.bytes);
        m->holding = true;
        auto x = std::make_unique<Transfer>();
        x->kind = Transfer::Kind::hold;
        x->team = t->id;
        x->message = m;
        start_transfer(*t, std::move(x));
    }
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
            } else {
                fail(m->sender, m->send, m->from);
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
            fail(client, (*it)->send, rank);
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
            fail(t.client_of(r), *it, r);
            it = recvs.erase(it);
        }
    }
    if (t.spans_nodes) node_member_gone(t, rank);
}

void TeamEngine::drop_p2p(Team &t) {
    if (!t.p2p) return;
    for (auto &member : t.p2p->members)
        for (const auto &m : member.arrived) release_copy(*m);  // (one being made is its transfer's too)
    if (t.spans_nodes) drop_node_p2p(t);
    t.p2p.reset();
}

}  // namespace deputy::agent
