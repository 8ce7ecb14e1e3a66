// Point-to-point between members on different nodes (p2p.h): the sending
// agent's half (a send to another node: eager with its bytes, or a request
// to send and its bytes once asked for), the receiving agent's (heads
// checked and queued among the local messages, bytes asked for when a
// receive takes the message, then delivered as a held copy is), and what
// each tells the other when a member leaves. The agents talk through the
// Internode (agent/internode.h): heads in one order per pair of agents,
// data on slots the receiving agent chose.
//
// A rendezvous message's bytes go from the sender's buffer to the
// receiver's by MPI alone where each agent maps its member's buffer (its
// pool, its shared heap): MPI reads and writes the agents' mappings of
// them. A buffer the agent reaches only through its member's process
// (registered ordinary memory), and an eager message (its bytes behind its
// head, in one MPI message), take a copy of the agent's on that side, made
// on the engines.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "agent/team/engine.h"
#include "agent/team/p2p.h"
#include "agent/team/team.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::agent {

namespace ch = channel;

bool TeamEngine::on_other_node(const Team &t, uint32_t rank) const {
    return t.spans_nodes && rank < t.node_of_rank.size() &&
           t.node_of_rank[rank] != internode_->node();
}

void TeamEngine::send_head(uint32_t node, const InterMessage &head) {
    auto out = std::make_shared<NodeOutgoing>();
    out->node = node;
    out->message = std::make_shared<std::vector<uint8_t>>(sizeof head);
    std::memcpy(out->message->data(), &head, sizeof head);
    out->ready = true;
    outbox_.push_back(std::move(out));
    flush_outbox();
}

void TeamEngine::flush_outbox() {
    while (!outbox_.empty() && outbox_.front()->ready) {
        const NodeOutgoing &o = *outbox_.front();
        if (o.message) internode_->send_p2p(o.node, o.message);
        outbox_.pop_front();
    }
}

void TeamEngine::return_credit(uint32_t node, uint64_t bytes) {
    if (node >= node_owed_.size()) return;
    // Said in batches of a quarter of the credit: a sender short of credit
    // meanwhile sends requests to send instead, never waits.
    node_owed_[node] += bytes;
    if (node_owed_[node] < std::max<uint64_t>(1, config_.p2p_node_credit_bytes / 4)) return;
    InterMessage h;
    h.kind = InterMessage::credit;
    h.bytes = node_owed_[node];
    node_owed_[node] = 0;
    send_head(node, h);
}

void TeamEngine::send_to_node(Team &t, const std::shared_ptr<P2pMessage> &m) {
    const uint32_t node = t.node_of_rank[m->to];
    const uint64_t bytes = m->send.bytes;
    const uint64_t cost = bytes + sizeof(InterMessage);
    InterMessage h;
    h.flags = m->send.flags;
    h.tag = m->send.tag;
    h.from = m->from;
    h.to = m->to;
    h.team_uid = t.uid;
    h.bytes = bytes;
    if (!(m->send.flags & ch::kP2pSynchronous) && bytes <= config_.p2p_node_eager_bytes &&
        node_credit_[node] >= cost) {
        node_credit_[node] -= cost;
        ++node_eager_sent_;
        h.kind = InterMessage::eager;
        auto out = std::make_shared<NodeOutgoing>();
        out->node = node;
        out->message = std::make_shared<std::vector<uint8_t>>(cost);
        std::memcpy(out->message->data(), &h, sizeof h);
        outbox_.push_back(out);
        if (bytes == 0) {
            out->ready = true;
            publish_p2p(m->sender, m->send, DP_COMP_SUCCESS, 0, 0, 0);
            p2p_answered(&t, m->from);
            return flush_outbox();
        }
        auto x = std::make_unique<Transfer>();
        x->kind = Transfer::Kind::outgoing;
        x->team = t.id;
        x->message = m;
        x->copy = out->message;
        x->eager = std::move(out);
        x->node = node;
        return start_transfer(t, std::move(x));
    }
    ++node_ready_sent_;
    h.kind = InterMessage::ready;
    h.id = next_node_id_++;
    node_sends_[h.id] = NodeSend{t.id, m};
    send_head(node, h);
}

void TeamEngine::outgoing_done(Transfer &x, uint8_t status) {
    const bool ok = status == DP_COMP_SUCCESS;
    if (x.eager) {
        // A failed copy: the message goes nowhere, its credit comes back.
        if (!ok) {
            x.eager->message.reset();
            node_credit_[x.node] += x.message->send.bytes + sizeof(InterMessage);
        }
        x.eager->ready = true;
        return flush_outbox();
    }
    // An empty piece tells the receiving agent the message is withdrawn.
    internode_->send_p2p_data(x.node, x.slot, ok ? P2pBytes::of(x.copy) : P2pBytes{}, 0);
}

P2pBytes TeamEngine::mapped_buffer(uint32_t client, uint64_t addr, uint64_t bytes, bool write) {
    ClientSession *c = hooks_.find_client(client);
    if (!c || bytes == 0) return {};
    void *p = c->space().translate(addr, bytes, write ? mover::Access::write : mover::Access::read);
    if (!p) return {};
    return {c->memory, static_cast<uint8_t *>(p), bytes};
}

void TeamEngine::on_node_sent(const InternodeEvent &e) {
    auto it = node_sending_.find(e.op_id);
    if (it == node_sending_.end()) return;  // failed meanwhile (its receiver's node lost)
    NodeSend s = std::move(it->second);
    node_sending_.erase(it);
    auto team = teams_.find(s.team);
    Team *t = team == teams_.end() ? nullptr : team->second.get();
    const P2pMessage &m = *s.message;
    publish_p2p(m.sender, m.send, e.comp_status, m.send.bytes, 0, 0);
    p2p_answered(t, m.from);
    if (e.comp_status != DP_COMP_SUCCESS) ++p2p_failed_;
}

void TeamEngine::answer_node_send(const P2pMessage &m, uint8_t status, uint32_t slot) {
    InterMessage h;
    h.kind = InterMessage::clear;
    h.status = status;
    h.slot = slot;
    h.id = m.node_id;
    h.bytes = m.send.bytes;
    h.from = m.from;
    h.to = m.to;
    send_head(m.from_node, h);
}

void TeamEngine::ask_for_data(Team &t, const std::shared_ptr<P2pMessage> &m,
                              const ch::P2pPost &recv, uint32_t receiver) {
    NodeReceive r;
    r.team = t.id;
    r.message = m;
    r.recv = recv;
    r.receiver = receiver;
    if (m->send.bytes == 0) {
        // Nothing to move: the receive is done, the send may complete.
        answer_node_send(*m, DP_COMP_SUCCESS, 0);
        publish_p2p(receiver, recv, DP_COMP_SUCCESS, 0, m->from, m->send.tag);
        p2p_answered(&t, m->to);
        ++p2p_messages_;
        return;
    }
    // In order: a receive waiting for room goes before later ones.
    if (!node_waiting_.empty() || !start_asking(r)) node_waiting_.push_back(std::move(r));
}

bool TeamEngine::start_asking(NodeReceive &r) {
    P2pMessage &m = *r.message;
    auto it = teams_.find(r.team);
    if (it == teams_.end()) return true;  // its team went: nobody waits for it
    Team &t = *it->second;
    const uint64_t bytes = m.send.bytes;
    if (free_slots_.empty()) return false;
    // Into the receiver's buffer where the agent maps it; else staged.
    P2pBytes into = mapped_buffer(r.receiver, r.recv.buf, bytes, true);
    if (!into.data && staged_bytes_ && staged_bytes_ + bytes > config_.p2p_node_stage_bytes)
        return false;
    try {
        if (!into.data) {
            r.stage = std::make_shared<std::vector<uint8_t>>(bytes);
            into = P2pBytes::of(r.stage);
        }
    } catch (const std::bad_alloc &) {
        DP_LOG_WARN("agent: team '{}': no memory for a {}-byte message from rank {} on node {}",
                    t.key, bytes, m.from, m.from_node);
        publish_p2p(r.receiver, r.recv, ch::kCollMemberLost, 0, m.from, m.send.tag);
        p2p_answered(&t, m.to);
        ++p2p_failed_;
        answer_node_send(m, ch::kCollMemberLost, 0);
        return true;
    }
    if (r.stage) staged_bytes_ += bytes;
    r.slot = free_slots_.back();
    free_slots_.pop_back();
    const uint64_t id = next_node_id_++;
    // The receive is posted before the sender is asked: its bytes find it.
    internode_->receive_p2p_data(m.from_node, r.slot, std::move(into), id);
    answer_node_send(m, DP_COMP_SUCCESS, r.slot);
    node_receives_[id] = std::move(r);
    return true;
}

void TeamEngine::ask_waiting() {
    while (!node_waiting_.empty() && start_asking(node_waiting_.front())) node_waiting_.pop_front();
}

void TeamEngine::on_node_data(const InternodeEvent &e) {
    auto it = node_receives_.find(e.op_id);
    if (it == node_receives_.end()) return;
    NodeReceive r = std::move(it->second);
    node_receives_.erase(it);
    free_slots_.push_back(r.slot);
    ask_waiting();  // (a slot is free)
    P2pMessage &m = *r.message;
    auto team = teams_.find(r.team);
    Team *t = team == teams_.end() ? nullptr : team->second.get();
    // Its bytes are here now (in the receiver's buffer, or a copy, as an
    // early message's), or never.
    if (r.stage) {
        m.copy = std::move(r.stage);
        m.copy_at = 0;
        m.copy_of = P2pMessage::CopyOf::node_data;
        m.held = true;
    }
    if (e.comp_status != DP_COMP_SUCCESS || !t) {
        if (t)
            DP_LOG_WARN("agent: team '{}': message of {} bytes from rank {} to rank {} (tag {}): {}",
                        t->key, m.send.bytes, m.from, m.to, m.send.tag, e.reason);
        release_copy(m);
        publish_p2p(r.receiver, r.recv, ch::kCollMemberLost, 0, m.from, m.send.tag);
        p2p_answered(t, m.to);
        ++p2p_failed_;
        return;
    }
    ++node_received_;
    if (!m.copy) {
        ++node_received_mapped_;
        publish_p2p(r.receiver, r.recv, DP_COMP_SUCCESS, m.send.bytes, m.from, m.send.tag);
        p2p_answered(t, m.to);
        ++p2p_messages_;
        p2p_bytes_ += m.send.bytes;
        return;
    }
    auto x = std::make_unique<Transfer>();
    x->kind = Transfer::Kind::deliver;
    x->team = t->id;
    x->message = r.message;
    x->recv = r.recv;
    x->receiver = r.receiver;
    start_transfer(*t, std::move(x));
}

void TeamEngine::on_node_p2p(const InternodeEvent &e) {
    const InterMessage &h = e.message;
    auto bad = [&](const std::string &why) {
        DP_LOG_WARN("agent: point-to-point message (kind {}) from node {} ignored: {}",
                    unsigned(h.kind), e.node, why);
    };
    if (h.kind == InterMessage::credit) {
        if (e.node < node_credit_.size()) node_credit_[e.node] += h.bytes;
        return;
    }
    if (h.kind == InterMessage::clear) {
        auto it = node_sends_.find(h.id);
        if (it == node_sends_.end()) {
            // Its sender left meanwhile: the receiving agent is told the
            // bytes will not come.
            if (h.status == DP_COMP_SUCCESS && h.bytes)
                internode_->send_p2p_data(e.node, h.slot, P2pBytes{}, 0);
            return;
        }
        NodeSend s = std::move(it->second);
        node_sends_.erase(it);
        P2pMessage &m = *s.message;
        auto team = teams_.find(s.team);
        Team *t = team == teams_.end() ? nullptr : team->second.get();
        if (h.status != DP_COMP_SUCCESS || m.send.bytes == 0) {
            // A receive took it (truncated: the send completes as sent) or
            // its receiver is gone.
            const uint8_t status = h.status == ch::kP2pTruncated ? uint8_t(DP_COMP_SUCCESS) : h.status;
            publish_p2p(m.sender, m.send, status, m.send.bytes, 0, 0);
            p2p_answered(t, m.from);
            if (status != DP_COMP_SUCCESS) ++p2p_failed_;
            return;
        }
        if (h.slot >= Internode::kP2pSlots || h.bytes != m.send.bytes || !t) {
            // (An agent of the same job that says this is broken: the send
            // fails rather than wait for ever.)
            publish_p2p(m.sender, m.send, ch::kCollMemberLost, 0, 0, 0);
            p2p_answered(t, m.from);
            ++p2p_failed_;
            return bad("a clear to send that does not fit its message");
        }
        // From the sender's buffer where the agent maps it: the send
        // completes once MPI read it.
        if (P2pBytes from = mapped_buffer(m.sender, m.send.buf, m.send.bytes, false); from.data) {
            const uint64_t sent_id = next_node_id_++;
            node_sending_[sent_id] = std::move(s);
            ++node_sent_mapped_;
            internode_->send_p2p_data(e.node, h.slot, std::move(from), sent_id);
            return;
        }
        std::shared_ptr<std::vector<uint8_t>> stage;
        try {
            stage = std::make_shared<std::vector<uint8_t>>(m.send.bytes);
        } catch (const std::bad_alloc &) {
            publish_p2p(m.sender, m.send, ch::kCollMemberLost, 0, 0, 0);
            p2p_answered(t, m.from);
            ++p2p_failed_;
            internode_->send_p2p_data(e.node, h.slot, P2pBytes{}, 0);
            return;
        }
        auto x = std::make_unique<Transfer>();
        x->kind = Transfer::Kind::outgoing;
        x->team = t->id;
        x->message = s.message;
        x->copy = std::move(stage);
        x->node = e.node;
        x->slot = h.slot;
        return start_transfer(*t, std::move(x));
    }
    // eager, ready, gone: about a member of a team here.
    auto by = by_uid_.find(h.team_uid);
    auto team = by == by_uid_.end() ? teams_.end() : teams_.find(by->second);
    Team *t = team == teams_.end() ? nullptr : team->second.get();
    if (!t && std::find(retired_uids_.begin(), retired_uids_.end(), h.team_uid) ==
                  retired_uids_.end()) {
        // Not formed here yet: its member map and its messages come by
        // different ways. Kept, in order, until it forms.
        Parked &p = node_parked_[h.team_uid];
        if (p.events.empty())
            p.deadline_ns = timing::now_ns() + uint64_t(config_.max_team_timeout_ms) * 1'000'000;
        p.events.push_back(e);
        return;
    }
    if (t && (h.from >= t->size || t->node_of_rank[h.from] != e.node))
        return bad(fmt::format("rank {} is not on that node", h.from));
    if (h.kind == InterMessage::gone) {
        if (!t) return;
        if (!t->p2p) t->p2p = std::make_unique<P2pQueues>(uint32_t(t->here.size()), t->size);
        if (t->p2p->node_gone[h.from]) return;
        t->p2p->node_gone[h.from] = 1;
        return p2p_member_gone(*t, h.from, 0);
    }
    if (h.kind != InterMessage::eager && h.kind != InterMessage::ready)
        return bad("unknown kind");
    const bool eager = h.kind == InterMessage::eager;
    if (eager && e.bytes->size() != sizeof(InterMessage) + h.bytes)
        return bad("its length is not its head's");
    if (!t || h.to >= t->size || on_other_node(*t, h.to) || h.bytes > ch::kMaxCollBytes ||
        h.tag < 0 || !t->client_of(h.to))
        return refuse_node_message(e);
    if (!t->p2p) t->p2p = std::make_unique<P2pQueues>(uint32_t(t->here.size()), t->size);
    P2pQueues &q = *t->p2p;
    auto m = std::make_shared<P2pMessage>();
    m->send.opcode = ch::kP2pSend;
    m->send.flags = h.flags;
    m->send.peer = int32_t(h.to);
    m->send.tag = h.tag;
    m->send.bytes = h.bytes;
    m->from = h.from;
    m->to = h.to;
    m->from_node = e.node;
    m->node_id = h.id;
    if (eager) {
        m->copy = e.bytes;
        m->copy_at = sizeof(InterMessage);
        m->copy_of = P2pMessage::CopyOf::node_early;
        m->held = true;
    }
    P2pQueues::Member &to = *q.at(t->slot_of(h.to));  // (a member here: checked above)
    auto &recvs = to.recvs;
    for (auto it = recvs.begin(); it != recvs.end(); ++it) {
        if (!ch::p2p_accepts(*it, h.from, h.tag)) continue;
        const ch::P2pPost recv = *it;
        recvs.erase(it);
        take_message(*t, m, recv, t->client_of(h.to));
        return;
    }
    to.arrived.push_back(std::move(m));
}

void TeamEngine::refuse_node_message(const InternodeEvent &e) {
    // Nobody here receives it: an early one's credit goes back, a request
    // to send is answered (its send fails).
    const InterMessage &h = e.message;
    if (h.kind == InterMessage::eager) {
        return_credit(e.node, h.bytes + sizeof(InterMessage));
    } else if (h.kind == InterMessage::ready) {
        P2pMessage m;
        m.node_id = h.id;
        m.from_node = e.node;
        m.from = h.from;
        m.to = h.to;
        answer_node_send(m, ch::kCollMemberLost, 0);
    }
}

void TeamEngine::replay_parked(uint64_t uid) {
    auto it = node_parked_.find(uid);
    if (it == node_parked_.end()) return;
    std::deque<InternodeEvent> events = std::move(it->second.events);
    node_parked_.erase(it);
    for (const InternodeEvent &e : events) on_node_p2p(e);
}

void TeamEngine::expire_parked() {
    const uint64_t now = timing::now_ns();
    for (auto it = node_parked_.begin(); it != node_parked_.end();) {
        if (now < it->second.deadline_ns) {
            ++it;
            continue;
        }
        DP_LOG_WARN("agent: {} point-to-point message(s) for team {} of the agents, which did not "
                    "form here within {} ms, refused",
                    it->second.events.size(), it->first, config_.max_team_timeout_ms);
        for (const InternodeEvent &e : it->second.events) refuse_node_message(e);
        it = node_parked_.erase(it);
    }
}

void TeamEngine::node_member_gone(Team &t, uint32_t rank) {
    // Sends of this node waiting for a receive of it, or of its own, or
    // for MPI to read their bytes (MPI may still read them: their member's
    // memory stays mapped while it does).
    for (auto *sends : {&node_sends_, &node_sending_}) {
        for (auto it = sends->begin(); it != sends->end();) {
            const P2pMessage &m = *it->second.message;
            if (it->second.team != t.id || (m.to != rank && m.from != rank)) {
                ++it;
                continue;
            }
            publish_p2p(m.sender, m.send, ch::kCollMemberLost, 0, 0, 0);
            p2p_answered(&t, m.from);
            ++p2p_failed_;
            it = sends->erase(it);
        }
    }
    // Receives of it waiting for room: nobody takes those bytes now.
    for (auto it = node_waiting_.begin(); it != node_waiting_.end();) {
        if (it->team != t.id || it->message->to != rank) {
            ++it;
            continue;
        }
        answer_node_send(*it->message, ch::kCollMemberLost, 0);
        it = node_waiting_.erase(it);
    }
    if (on_other_node(t, rank)) return;
    // This node's member: the others' agents learn it after every head it
    // sent (the order of heads), so its last messages are still received.
    InterMessage h;
    h.kind = InterMessage::gone;
    h.from = rank;
    h.team_uid = t.uid;
    std::vector<uint32_t> nodes = t.node_of_rank;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    for (uint32_t n : nodes)
        if (n != internode_->node()) send_head(n, h);
}

void TeamEngine::on_node_lost(const InternodeEvent &e) {
    for (auto &[id, team] : teams_) {
        Team &t = *team;
        if (!t.spans_nodes) continue;
        for (uint32_t r = 0; r < t.size; ++r) {
            if (t.node_of_rank[r] != e.node) continue;
            if (!t.p2p) t.p2p = std::make_unique<P2pQueues>(uint32_t(t.here.size()), t.size);
            if (t.p2p->node_gone[r]) continue;
            DP_LOG_WARN("agent: team '{}': rank {} is gone with its node: {}", t.key, r, e.reason);
            t.p2p->node_gone[r] = 1;
            p2p_member_gone(t, r, 0);
        }
    }
}

void TeamEngine::drop_node_p2p(const Team &t) {
    for (auto *sends : {&node_sends_, &node_sending_})
        for (auto it = sends->begin(); it != sends->end();)
            it = it->second.team == t.id ? sends->erase(it) : std::next(it);
    for (auto it = node_waiting_.begin(); it != node_waiting_.end();)
        it = it->team == t.id ? node_waiting_.erase(it) : std::next(it);
}

}  // namespace deputy::agent
