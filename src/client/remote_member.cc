#include "client/remote_member.h"

#include <sys/socket.h>

#include <bit>
#include <cstring>
#include <vector>

#include "channel/p2p_post.h"
#include "channel/socket_io.h"
#include "channel/transport/tcp/transport.h"
#include "client/context.h"
#include "client/staged_collective.h"
#include "client/team.h"
#include "common/check.h"
#include "common/log.h"
#include "mover/execute.h"

namespace deputy::client {
namespace {

namespace control = channel::control;
using channel::MsgType;

// Once a message's first byte is here, the rest follows within this.
constexpr int64_t kMessageNs = 10'000'000'000;

}  // namespace

dp_status_t RemoteMember::join(Context *ctx, const control::TeamJoin &m, int64_t wait_ns,
                               control::TeamReady *ready, std::unique_ptr<RemoteMember> *out) {
    std::unique_ptr<RemoteMember> member(new RemoteMember());
    member->rank_ = m.rank;
    member->size_ = m.size;
    DP_CHECK(ctx->open_proxy_link(&member->socket_, &member->relay_, "dp_team_create"));
    if (ctx->options().memory_mode == DP_MEMORY_RDMA) {
        // The agent's host, to put our endpoint on the interface towards it.
        std::string host, port;
        channel::tcp::split_host_port(ctx->options().address.substr(sizeof("tcp://") - 1), &host,
                                      &port);
        DP_CHECK(member->open_fabric(ctx, host, wait_ns));
    }
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    DP_CHECK(control::send_message(member->socket_.get(), MsgType::kTeamJoin, payload, nullptr, 0,
                                   wait_ns, "dp_team_create"));
    MsgType type;
    std::vector<uint8_t> answer;
    size_t nfds = 0;
    const dp_status_t s = control::recv_message(member->socket_.get(), control::kMaxControlMessage,
                                                &type, &answer, nullptr, 0, &nfds, wait_ns,
                                                "dp_team_create");
    if (s == DP_ERR_IO)
        DP_FAIL(DP_ERR_AGENT_LOST, "dp_team_create: team '{}': the agent's team proxy closed the "
                "link (its max_remote_clients, or the agent stopped)", m.key);
    DP_CHECK(s);
    std::string error;
    if (type != MsgType::kTeamReady ||
        control::decode(answer.data(), answer.size(), ready, &error) != DP_OK)
        DP_FAIL(DP_ERR_INTERNAL, "dp_team_create: unexpected answer {} {}",
                channel::msg_type_name(type), error);
    if (ready->status == DP_OK) {
        RemoteMember *self = member.get();
        member->receiver_ = std::thread([self] { self->receive_loop(); });
    }
    *out = std::move(member);
    return DP_OK;
}

dp_status_t RemoteMember::open_fabric(Context *ctx, const std::string &agent_host,
                                      int64_t wait_ns) {
    const std::string &provider = ctx->options().fabric_provider;
    control::ProxyFabric f;
    try {
        exposed_ = ctx->exposed_memory(agent_host);
        f.provider = provider;
        f.address = exposed_->address();
    } catch (const fabric::FabricError &e) {
        DP_FAIL(DP_ERR_UNSUPPORTED, "dp_team_create (memory mode rdma): this host's RMA endpoint: "
                "{}", e.what());
    }
    if (f.address.empty() || f.address.size() > control::kMaxFabricAddress)
        DP_FAIL(DP_ERR_UNSUPPORTED, "dp_team_create (memory mode rdma): provider '{}' gave a "
                "{}-byte endpoint address (1..{})", provider, f.address.size(),
                control::kMaxFabricAddress);
    std::vector<uint8_t> payload;
    control::encode(f, &payload);
    DP_CHECK(control::send_message(socket_.get(), MsgType::kProxyFabric, payload, nullptr, 0,
                                   wait_ns, "dp_team_create"));
    MsgType type;
    std::vector<uint8_t> answer;
    size_t nfds = 0;
    const dp_status_t s = control::recv_message(socket_.get(), control::kMaxControlMessage, &type,
                                                &answer, nullptr, 0, &nfds, wait_ns,
                                                "dp_team_create");
    if (s == DP_ERR_IO)
        DP_FAIL(DP_ERR_AGENT_LOST, "dp_team_create (memory mode rdma): the agent's team proxy "
                "closed the link (its max_remote_clients, or the agent stopped)");
    DP_CHECK(s);
    control::Reply reply;
    std::string error;
    if (type != MsgType::kReply ||
        control::decode(answer.data(), answer.size(), &reply, &error) != DP_OK)
        DP_FAIL(DP_ERR_INTERNAL, "dp_team_create: unexpected answer {} {}",
                channel::msg_type_name(type), error);
    if (reply.status != DP_OK)
        DP_FAIL(reply.status, "dp_team_create (memory mode rdma): the agent's team proxy cannot "
                "reach this process's memory: {}", reply.reason);
    return DP_OK;
}

dp_status_t RemoteMember::expose(uint32_t slot, const void *post, const void *counts,
                                 control::ProxyPost *m) {
    uint64_t src = 0, src_bytes = 0, dst = 0, dst_bytes = 0;
    const uint8_t opcode = *static_cast<const uint8_t *>(post);
    if (channel::is_p2p_post(opcode)) {
        channel::P2pPost p;
        std::memcpy(&p, post, sizeof(p));
        if (p.opcode == channel::kP2pSend) {
            src = p.buf;
            src_bytes = p.bytes;
        } else if (p.opcode == channel::kP2pRecv) {
            dst = p.buf;
            dst_bytes = p.bytes;
        }
    } else {
        channel::CollPost p;
        std::memcpy(&p, post, sizeof(p));
        const std::optional<coll::Collective> c = channel::collective_of(p);
        // What the agent would refuse goes out unexposed: the proxy refuses it.
        if (c && *c != coll::Collective::barrier && p.dtype < DP_DTYPE_COUNT) {
            const uint64_t elem = dp_dtype_size(dp_dtype_t(p.dtype));
            if (coll::is_vector(*c)) {
                if (counts && !vector_extents(static_cast<const uint64_t *>(counts), size_, elem,
                                              &src_bytes, &dst_bytes))
                    src_bytes = dst_bytes = 0;
            } else if (!coll::rooted(*c) || p.root < size_) {
                const coll::MemberBytes r =
                    coll::member_bytes(*c, p.count, elem, size_, rank_, p.root);
                src_bytes = r.source;
                dst_bytes = r.destination;
            }
            src = p.src;
            dst = p.dst;
        }
    }
    Windows &w = windows_[slot];
    try {
        if (src_bytes)
            w.source = exposed_->expose(reinterpret_cast<const void *>(src), src_bytes,
                                        FI_REMOTE_READ);
        if (dst_bytes)
            w.destination = exposed_->expose(reinterpret_cast<const void *>(dst), dst_bytes,
                                             FI_REMOTE_WRITE);
    } catch (const fabric::FabricError &e) {
        w = Windows{};
        DP_FAIL(DP_ERR_DENIED, "deputy collective (memory mode rdma): exposing a buffer to the "
                "agent: {}", e.what());
    }
    m->memory = control::kProxyRemoteMemory;
    if (w.source) {
        m->src_base = w.source->remote_base();
        m->src_key = w.source->key();
    }
    if (w.destination) {
        m->dst_base = w.destination->remote_base();
        m->dst_key = w.destination->key();
    }
    return DP_OK;
}

RemoteMember::~RemoteMember() {
    // Both directions: the relay sends END to the proxy, which leaves the
    // team; our receiver sees the end and fails what is still in flight.
    if (socket_) ::shutdown(socket_.get(), SHUT_RDWR);
    if (receiver_.joinable()) receiver_.join();
    relay_.reset();
}

void RemoteMember::finish(Request *r, uint8_t status, uint64_t bytes, uint32_t result,
                          uint64_t value) {
    mover::OpResult outcome;
    outcome.status = status;
    outcome.bytes = bytes;
    outcome.result = result;
    outcome.value = value;
    mover::publish_completion(r->record, outcome, 0);
}

dp_status_t RemoteMember::post(Request &r, uint32_t slot, const void *post, const void *counts,
                               uint32_t counts_bytes) {
    if (broken_.load(std::memory_order_acquire))
        DP_FAIL(DP_ERR_AGENT_LOST, "deputy collective: the link to the team's proxy at the "
                "remote agent is gone");
    const StagedCollective &st = r.staged;
    control::ProxyPost m;
    m.slot = slot;
    std::memcpy(m.post, post, sizeof(m.post));
    const auto *in = static_cast<const uint8_t *>(st.bounce) + st.in_offset;
    if (exposed_ && !st.active()) {
        DP_CHECK(expose(slot, post, counts, &m));
    } else if (st.active()) {  // staged, or a small message of an rdma context (p2p.cc)
        m.block_base = reinterpret_cast<uint64_t>(st.bounce);
        m.block_bytes = st.block_bytes;
        m.in_offset = st.in_offset;
        m.in_total = st.in_bytes;
        m.in.assign(in, in + std::min<uint64_t>(st.in_bytes, control::kProxyChunkBytes));
    }
    if (counts_bytes) {
        const auto *c = static_cast<const uint8_t *>(counts);
        m.counts.assign(c, c + counts_bytes);
    }
    requests_[slot] = &r;
    in_flight_[slot / 64].fetch_or(uint64_t(1) << (slot % 64), std::memory_order_release);
    dp_status_t s;
    {
        // The post and the rest of its bytes go out together: the proxy
        // reads them as one.
        std::lock_guard lock(send_mutex_);
        std::vector<uint8_t> payload;
        control::encode(m, &payload);
        s = control::send_message(socket_.get(), MsgType::kProxyPost, payload, nullptr, 0, -1,
                                  "deputy collective");
        for (uint64_t at = m.in.size(); s == DP_OK && at < m.in_total;
             at += control::kProxyChunkBytes) {
            const uint64_t len = std::min<uint64_t>(m.in_total - at, control::kProxyChunkBytes);
            control::ProxyData d{slot, m.in_offset + at, {in + at, in + at + len}};
            payload.clear();
            control::encode(d, &payload);
            s = control::send_message(socket_.get(), MsgType::kProxyData, payload, nullptr, 0,
                                      -1, "deputy collective");
        }
    }
    if (s == DP_OK && !broken_.load(std::memory_order_acquire)) return DP_OK;
    // The link ended around the send: whoever clears the bit answers for the
    // request (the receiver publishes member-lost; here, an error) and
    // revokes its ranges.
    if (take(slot)) {
        windows_[slot] = Windows{};
        DP_FAIL(DP_ERR_AGENT_LOST, "deputy collective: the link to the team's proxy at the "
                "remote agent ended");
    }
    return DP_OK;
}

bool RemoteMember::place(uint32_t slot, uint64_t offset, const std::vector<uint8_t> &bytes) {
    if (!in_flight(slot)) {
        DP_LOG_ERROR("deputy collective: the remote agent's team proxy answered slot {}, which "
                     "has nothing in flight; closing the link",
                     slot);
        return false;
    }
    if (bytes.empty()) return true;
    const StagedCollective &st = requests_[slot]->staged;
    uint64_t end = 0;
    if (!st.active() || __builtin_add_overflow(offset, bytes.size(), &end) ||
        end > st.block_bytes) {
        DP_LOG_ERROR("deputy collective: the remote agent's team proxy sent {} bytes at {} for "
                     "a {}-byte block; closing the link",
                     bytes.size(), offset, st.block_bytes);
        return false;
    }
    std::memcpy(static_cast<uint8_t *>(st.bounce) + offset, bytes.data(), bytes.size());
    return true;
}

void RemoteMember::receive_loop() {
    for (;;) {
        MsgType type;
        std::vector<uint8_t> payload;
        size_t nfds = 0;
        // The link's end between messages is how it ends cleanly: not logged.
        if (channel::sock::wait_next_message(socket_.get(), -1, "deputy collective") != DP_OK ||
            control::recv_message(socket_.get(), control::kMaxControlMessage, &type, &payload,
                                  nullptr, 0, &nfds, kMessageNs, "deputy collective") != DP_OK)
            break;
        std::string error;
        if (type == MsgType::kProxyData) {
            control::ProxyData d;
            if (control::decode(payload.data(), payload.size(), &d, &error) != DP_OK ||
                !place(d.slot, d.offset, d.bytes)) {
                if (!error.empty())
                    DP_LOG_ERROR("deputy collective: the remote agent's team proxy: {}; closing "
                                 "the link", error);
                break;
            }
            continue;
        }
        control::ProxyDone done;
        if (type != MsgType::kProxyDone ||
            control::decode(payload.data(), payload.size(), &done, &error) != DP_OK) {
            DP_LOG_ERROR("deputy collective: the remote agent's team proxy sent {} {}; closing "
                         "the link", channel::msg_type_name(type), error);
            break;
        }
        if (done.status == 0) {
            DP_LOG_ERROR("deputy collective: the remote agent's team proxy answered slot {} "
                         "with status 0; closing the link", done.slot);
            break;
        }
        if (!place(done.slot, done.out_offset, done.out)) break;
        // The operation is over: its keys reach nothing from now on.
        windows_[done.slot] = Windows{};
        // The bit first: once the record says done, the slot may be posted again.
        take(done.slot);
        finish(requests_[done.slot], done.status, done.bytes_completed, done.result, done.value);
    }
    broken_.store(true, std::memory_order_release);
    for (uint32_t w = 0; w < kWords; ++w) {
        uint64_t left = in_flight_[w].exchange(0, std::memory_order_acq_rel);
        while (left) {
            const uint32_t slot = w * 64 + uint32_t(std::countr_zero(left));
            left &= left - 1;
            windows_[slot] = Windows{};
            finish(requests_[slot], channel::kCollMemberLost, 0);
        }
    }
}

}  // namespace deputy::client
