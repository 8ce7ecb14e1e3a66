#include "client/team.h"

#include "client/p2p.h"

#include <algorithm>
#include <cstring>

#include "channel/coll_post.h"
#include "channel/control.h"
#include "coll/vector_counts.h"
#include "common/check.h"
#include "common/log.h"

namespace deputy::client {
namespace {
namespace control = channel::control;
using channel::MsgType;
}  // namespace

dp_status_t coll_status(uint8_t status) {
    switch (status) {
        case DP_COMP_SUCCESS: return DP_OK;
        case channel::kCollMismatch: return DP_ERR_MISMATCH;
        case channel::kCollMemberLost: return DP_ERR_AGENT_LOST;
        case channel::kCollQueueFull: return DP_ERR_RETRY;
        case channel::kP2pTruncated: return DP_ERR_TRUNCATED;
        case DP_COMP_ADDRESS_DENIED:
        case DP_COMP_PAGE_FAULT: return DP_ERR_DENIED;
        case DP_COMP_INVALID_SIZE: return DP_ERR_TOO_LARGE;
        case DP_COMP_INVALID_OPCODE:
        case DP_COMP_INVALID_FIELD:
        case DP_COMP_INVALID_FLAGS:
        case DP_COMP_INVALID_BATCH:
        case DP_COMP_OVERLAP: return DP_ERR_INVALID;
        default: return DP_ERR_INTERNAL;
    }
}

dp_status_t request_result(Request *req) {
    const uint8_t status = __atomic_load_n(&req->record->status, __ATOMIC_ACQUIRE);
    if (status == DP_COMP_SUCCESS && req->staged.active()) [[unlikely]] {
        // A receive's result is the message, which may be shorter than its buffer.
        if (req->p2p) req->staged.out_bytes = std::min(req->staged.out_bytes, req->record->bytes_completed);
        stage_out(&req->staged);
    }
    return coll_status(status);
}

dp_status_t Team::join(Context *ctx, const std::string &key, int rank, int size,
                       unsigned timeout_ms, Team **out) {
    if (key.empty() || key.size() > control::kMaxTokenBytes)
        DP_FAIL(DP_ERR_INVALID, "dp_team_create: key of {} bytes (1..{})", key.size(),
                control::kMaxTokenBytes);
    if (size < 1 || size > DP_TEAM_MAX_SIZE || rank < 0 || rank >= size)
        DP_FAIL(DP_ERR_INVALID, "dp_team_create: rank {} of size {} (size 1..{}, rank 0..size-1)",
                rank, size, DP_TEAM_MAX_SIZE);
    if (ctx->options().job_secret.empty())
        DP_FAIL(DP_ERR_DENIED,
                "dp_team_create: team '{}': no job secret. Joining a team needs the job's secret, "
                "the same in every member: deputy launch sets DEPUTY_JOB_SECRET; otherwise set it "
                "(or dp_config_t.job_secret) to a random value shared by the job's processes",
                key);
    std::unique_ptr<Team> t(new Team());
    t->ctx_ = ctx;
    t->rank_ = rank;
    t->size_ = size;
    t->records_ = static_cast<dp_completion_t *>(
        ctx->pool().allocate(sizeof(dp_completion_t) * DP_TEAM_MAX_OUTSTANDING));
    if (!t->records_)
        DP_FAIL(DP_ERR_NOMEM, "dp_team_create: no room for {} completion records in the pool",
                DP_TEAM_MAX_OUTSTANDING);
    t->staged_ = ctx->options().memory_mode == DP_MEMORY_STAGED;
    for (uint32_t i = 0; i < DP_TEAM_MAX_OUTSTANDING; ++i)
        t->slots_[i] = {t.get(), &t->records_[i], i, {}};
    // The join id is the control channel's to choose.
    control::TeamJoin m{0, key, ctx->options().job_secret, uint32_t(rank), uint32_t(size),
                        timeout_ms};
    // A member that will not run operations makes the board useless to the
    // whole team (rank_execution.h): say so, and nobody gets one.
    if (!ctx->options().rank_execution) m.flags |= control::kJoinAgentRuns;
    // The agent answers by the team's timeout; the margin covers its turn.
    const int64_t wait_ns = (int64_t(timeout_ms ? timeout_ms : 30000) + 2000) * 1'000'000;
    control::TeamReady ready;
    std::vector<Segment> segments;
    if (ctx->remote()) {
        // A team proxy on the agent's host joins in our place (remote_member.h).
        DP_CHECK(RemoteMember::join(ctx, m, wait_ns, &ready, &t->remote_));
    } else {
        DP_CHECK(ctx->join_team(m, &ready, &segments, wait_ns));
    }
    if (ready.status != DP_OK)
        DP_FAIL(ready.status, "dp_team_create: {} ({})", ready.reason, dp_status_name(ready.status));
    t->id_ = ready.team_id;
    t->ranks_ = RankExecution::create(ctx, uint32_t(rank), uint32_t(size), ready,
                                      std::move(segments));
    *out = t.release();
    return DP_OK;
}

Team::~Team() {
    remote_.reset();  // its receiver writes records: gone before they are
    if (records_) ctx_->pool().release(records_);
    for (Request &r : slots_)
        if (r.counts) ctx_->pool().release(r.counts);
}

bool Team::take_slot(uint32_t *slot) {
    uint64_t free = free_slots_.load(std::memory_order_relaxed);
    while (free != 0) {
        const uint32_t lowest = uint32_t(std::countr_zero(free));
        // Acquire pairs with release(): the last user of the slot is done
        // with its Request before we reuse it.
        if (free_slots_.compare_exchange_weak(free, free & ~(uint64_t(1) << lowest),
                                              std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
            *slot = lowest;
            return true;
        }
    }
    return false;
}

dp_status_t Team::post(coll::Collective c, const void *src, void *dst, uint64_t count,
                       dp_dtype_t dtype, dp_op_t op, uint64_t root, Request **req) {
    if (req == nullptr) return DP_ERR_INVALID;
    *req = nullptr;
    uint32_t slot;
    if (!take_slot(&slot)) [[unlikely]]
        DP_FAIL(DP_ERR_TOO_LARGE,
                "deputy collective: {} requests outstanding on this team (the limit); "
                "complete and free some first",
                DP_TEAM_MAX_OUTSTANDING);
    Request &r = slots_[slot];
    *r.record = dp_completion_t{};  // 32 bytes: stores, not a call
    if (staged_) [[unlikely]] {
        StagedPointers staged;
        if (dp_status_t s = stage_in(ctx_->pool(), c, rank_, size_, src, dst, count,
                                     dp_dtype_size(dtype), root, &r.staged, &staged);
            s != DP_OK) {
            release(&r);
            return s;
        }
        src = staged.src;
        dst = staged.dst;
    }
    channel::CollPost post{};
    post.opcode = uint8_t(channel::kCollPostBase + uint8_t(c));
    post.dtype = uint8_t(dtype);
    post.redop = uint8_t(op);
    post.team = id_;
    post.completion = reinterpret_cast<uint64_t>(r.record);
    post.src = reinterpret_cast<uint64_t>(src);
    post.dst = reinterpret_cast<uint64_t>(dst);
    post.count = count;
    post.root = uint32_t(root);
    const coll::MemberBytes bytes =
        coll::member_bytes(c, count, dp_dtype_size(dtype), size_, rank_, uint32_t(root));
    r.yield_first = std::max(bytes.source, bytes.destination) <= kYieldFirstMaxBytes;
    DP_CHECK(push(r, post));
    *req = &r;
    return DP_OK;
}

dp_status_t Team::push(Request &r, channel::CollPost post) {
    // Numbered here, once nothing can refuse it any more (a push fails only
    // when the agent is gone): the members' count of operations is the
    // agent's, which names them on the team's board.
    post.sequence = sequence_.fetch_add(1, std::memory_order_relaxed);
    r.sequence = post.sequence + 1;
    if (ranks_) [[unlikely]] {
        if (dp_status_t s = ranks_->before_post(r.sequence); s != DP_OK) {
            release(&r);
            return s;
        }
        ranks_->posted(r.sequence, post, &r);
    } else if (remote_) [[unlikely]] {  // (a remote member never runs operations: no ranks_)
        dp_status_t s = remote_->post(r, r.slot, &post,
                                      reinterpret_cast<const void *>(post.counts),
                                      post.counts_bytes);
        if (s != DP_OK) release(&r);
        return s;
    }
    dp_desc_t slot_bytes;
    std::memcpy(&slot_bytes, &post, sizeof(slot_bytes));
    dp_status_t s = ctx_->push(slot_bytes, true);
    if (s != DP_OK) [[unlikely]]
        release(&r);
    return s;
}

dp_status_t Team::post_vector(coll::Collective c, const void *src, const size_t *scounts,
                              const size_t *sdispls, void *dst, const size_t *rcounts,
                              const size_t *rdispls, dp_dtype_t dtype, dp_op_t op,
                              uint64_t root, Request **req) {
    if (req == nullptr) return DP_ERR_INVALID;
    *req = nullptr;
    uint32_t slot;
    if (!take_slot(&slot))
        DP_FAIL(DP_ERR_TOO_LARGE,
                "deputy {}: {} requests outstanding on this team (the limit); complete "
                "and free some first",
                coll::collective_name(c), DP_TEAM_MAX_OUTSTANDING);
    Request &r = slots_[slot];
    *r.record = dp_completion_t{};
    const uint64_t block_bytes = coll::vector_counts_bytes(uint32_t(size_));
    if (!r.counts) [[unlikely]] {
        r.counts = ctx_->pool().allocate(block_bytes);
        if (!r.counts) {
            release(&r);
            DP_FAIL(DP_ERR_NOMEM,
                    "deputy {}: no {}-byte counts block in the mapped pool ({} bytes free); "
                    "raise dp_config_t.pool_bytes or the agent's pool_bytes",
                    coll::collective_name(c), block_bytes, ctx_->pool().free_bytes());
        }
    }
    auto *block = static_cast<uint64_t *>(r.counts);
    coll::encode_vector_counts(uint32_t(size_), scounts, sdispls, rcounts, rdispls, block);
    if (staged_) {
        StagedPointers staged;
        if (dp_status_t s = stage_in_vector(ctx_->pool(), src, dst, block, uint32_t(size_),
                                            dp_dtype_size(dtype), &r.staged, &staged);
            s != DP_OK) {
            release(&r);
            return s;
        }
        src = staged.src;
        dst = staged.dst;
    }
    channel::CollPost post{};
    post.opcode = uint8_t(channel::kCollPostBase + uint8_t(c));
    post.dtype = uint8_t(dtype);
    post.redop = coll::reduces(c) ? uint8_t(op) : 0;
    post.root = uint32_t(root);
    post.team = id_;
    post.completion = reinterpret_cast<uint64_t>(r.record);
    post.src = reinterpret_cast<uint64_t>(src);
    post.dst = reinterpret_cast<uint64_t>(dst);
    post.counts_bytes = uint32_t(block_bytes);
    post.counts = reinterpret_cast<uint64_t>(block);
    // Small like the others (Team::post), by the larger of its two sums.
    uint64_t sent = 0, received = 0;
    for (int m = 0; m < size_; ++m) {
        sent += scounts[m];
        received += rcounts[m];
    }
    r.yield_first = std::max(sent, received) <=
                    kYieldFirstMaxBytes / std::max<size_t>(1, dp_dtype_size(dtype));
    DP_CHECK(push(r, post));
    *req = &r;
    return DP_OK;
}

void Team::release(Request *req) {
    if (req->p2p) [[unlikely]]
        return p2p_->release(req);
    if (ranks_) ranks_->released(req);
    if (req->staged.active()) [[unlikely]]
        stage_release(ctx_->pool(), &req->staged);
    free_slots_.fetch_or(uint64_t(1) << req->slot, std::memory_order_release);
}

dp_status_t Team::p2p(TeamP2p **out) {
    if (TeamP2p *p = p2p_ready_.load(std::memory_order_acquire)) [[likely]] {
        *out = p;
        return DP_OK;
    }
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    if (!p2p_) {
        DP_CHECK(TeamP2p::create(this, &p2p_));
        p2p_ready_.store(p2p_.get(), std::memory_order_release);
    }
    *out = p2p_.get();
    return DP_OK;
}

dp_status_t Team::leave() {
    if (remote_) {  // its proxy leaves when the link closes
        remote_.reset();
        return DP_OK;
    }
    std::vector<uint8_t> payload;
    control::encode_team_leave(id_, &payload);
    return ctx_->simple_request(MsgType::kTeamLeave, payload, "dp_team_destroy");
}

}  // namespace deputy::client
