#include "client/remote_member.h"

#include <sys/socket.h>

#include <bit>
#include <cstring>
#include <vector>

#include "channel/socket_io.h"
#include "client/context.h"
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
    DP_CHECK(ctx->open_proxy_link(&member->socket_, &member->relay_, "dp_team_create"));
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
    if (st.active()) {
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
    // request (the receiver publishes member-lost; here, an error).
    if (take(slot))
        DP_FAIL(DP_ERR_AGENT_LOST, "deputy collective: the link to the team's proxy at the "
                "remote agent ended");
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
            finish(requests_[slot], channel::kCollMemberLost, 0);
        }
    }
}

}  // namespace deputy::client
