#include "client/p2p.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/check.h"
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
    free_[req->slot / 64].fetch_or(uint64_t(1) << (req->slot % 64), std::memory_order_release);
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
    if (bytes && (mode == DP_MEMORY_STAGED || (mode == DP_MEMORY_RDMA && bytes < kRdmaFromBytes)))
        [[unlikely]] {
        // A bounce block in the pool: the send's bytes copied in now, a
        // receive's copied out when its wait first sees it done.
        void *bounce = ctx_->pool().allocate(bytes);
        if (!bounce) {
            release(&r);
            DP_FAIL(DP_ERR_NOMEM,
                    "{}: no {}-byte bounce buffer in the mapped pool ({} bytes free; staged "
                    "memory mode: every message in flight holds one until it completes; "
                    "complete some, raise dp_config_t.pool_bytes, or use memory mode rdma "
                    "with a remote agent)",
                    name_of(opcode), bytes, ctx_->pool().free_bytes());
        }
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
    channel::P2pPost post{};
    post.opcode = opcode;
    post.flags = flags;
    post.team = team_->id();
    post.completion = reinterpret_cast<uint64_t>(r.record);
    post.buf = reinterpret_cast<uint64_t>(buf);
    post.bytes = bytes;
    post.peer = peer;
    post.tag = tag;
    post.sequence = sequence_.fetch_add(1, std::memory_order_relaxed);
    r.sequence = post.sequence + 1;
    r.p2p_opcode = opcode;
    r.yield_first = bytes <= kYieldFirstMaxBytes;
    if (dp_status_t s = push(r, post); s != DP_OK) [[unlikely]] {
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
