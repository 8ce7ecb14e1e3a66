#include "client/agent_mover.h"

#include <cstring>

#include "client/staged_ranges.h"
#include "common/check.h"
#include "common/futex.h"
#include "common/timing.h"
#include "mover/wait.h"
#include "mover/names.h"

namespace deputy::client {
namespace {

namespace control = channel::control;

bool inside(const std::vector<ByteRange> &ranges, uint64_t addr, uint64_t len) {
    for (const ByteRange &r : ranges)
        if (addr >= r.addr && addr - r.addr <= r.len && len <= r.len - (addr - r.addr)) return true;
    return false;
}

}  // namespace

dp_status_t AgentMover::submit(uint32_t wq, const dp_desc_t &desc) {
    if (wq != 0) DP_FAIL(DP_ERR_INVALID, "dp_mover_submit: wq {} (an attached mover has wq 0 only)", wq);
    DP_CHECK(ctx_->check_alive());
    // An agent on another host (staged or rdma) gets every descriptor's bytes.
    if (ctx_->options().memory_mode != DP_MEMORY_DIRECT) return submit_staged(desc);
    if (desc.opcode >= 0x80)
        DP_FAIL(DP_ERR_INVALID, "dp_mover_submit: opcode 0x{:x} is not a mover operation",
                desc.opcode);
    dp_status_t s = ctx_->push(desc, false);
    if (s == DP_ERR_RETRY) retries_.fetch_add(1, std::memory_order_relaxed);
    return s;
}

dp_status_t AgentMover::submit_staged(const dp_desc_t &desc) {
    StagedPlan plan;
    if (plan_staged(desc, &plan) != DP_OK)
        DP_FAIL(DP_ERR_UNSUPPORTED, "dp_mover_submit: {} is not available in staged memory mode",
                mover::opcode_name(desc.opcode));
    const uint64_t limit = ctx_->attached().max_staged;
    control::Staged m;
    m.desc = desc;
    for (const ByteRange &r : plan.send) {
        if (r.len > limit)
            DP_FAIL(DP_ERR_TOO_LARGE,
                    "dp_mover_submit: staged range of {} bytes is above the agent's "
                    "max_staged_bytes {}",
                    r.len, limit);
        const auto *p = reinterpret_cast<const uint8_t *>(r.addr);
        m.sources.push_back({r.addr, std::vector<uint8_t>(p, p + r.len)});
    }
    for (const ByteRange &r : plan.writes)
        if (r.len > limit)
            DP_FAIL(DP_ERR_TOO_LARGE,
                    "dp_mover_submit: staged destination of {} bytes is above the agent's "
                    "max_staged_bytes {}",
                    r.len, limit);
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    if (payload.size() > control::kMaxControlMessage)
        DP_FAIL(DP_ERR_TOO_LARGE, "dp_mover_submit: staged message of {} bytes is above {}",
                payload.size(), control::kMaxControlMessage);
    channel::MsgType type;
    std::vector<uint8_t> answer;
    DP_CHECK(ctx_->request(channel::MsgType::kStaged, payload, &type, &answer));
    control::StagedResult result;
    std::string error;
    if (type != channel::MsgType::kStagedResult ||
        control::decode(answer.data(), answer.size(), &result, &error) != DP_OK)
        DP_FAIL(DP_ERR_INTERNAL, "dp_mover_submit: unexpected staged answer {} {}",
                channel::msg_type_name(type), error);
    if (result.status != DP_OK)
        DP_FAIL(result.status, "dp_mover_submit: the agent refused the staged descriptor ({})",
                dp_status_name(result.status));
    // Trust but verify: the agent may only write where this descriptor writes.
    for (const control::StagedRange &w : result.writes)
        if (!inside(plan.writes, w.addr, w.bytes.size()))
            DP_FAIL(DP_ERR_INTERNAL,
                    "dp_mover_submit: the agent returned bytes for [0x{:x}, +{}), which the "
                    "descriptor does not write",
                    w.addr, w.bytes.size());
    for (const control::StagedRange &w : result.writes)
        std::memcpy(reinterpret_cast<void *>(w.addr), w.bytes.data(), w.bytes.size());
    ctx_->submitted().fetch_add(1, std::memory_order_relaxed);
    if ((desc.flags & DP_FLAG_COMPLETION) && desc.completion) {
        auto *record = reinterpret_cast<dp_completion_t *>(desc.completion);
        record->result = result.record.result;
        record->bytes_completed = result.record.bytes_completed;
        record->value = result.record.value;
        record->user = result.record.user;
        __atomic_store_n(&record->status, result.record.status, __ATOMIC_RELEASE);
        if (__atomic_load_n(&record->waiter, __ATOMIC_ACQUIRE))
            futex_wake(reinterpret_cast<uint32_t *>(record), INT32_MAX);
    }
    return DP_OK;
}

dp_status_t AgentMover::wait(dp_completion_t *comp, dp_wait_mode_t mode, int64_t timeout_ns) {
    return ctx_->wait_record(comp, mode, timeout_ns);
}

void AgentMover::stats(dp_mover_stats_t *out) const {
    std::memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    out->submitted = ctx_->submitted().load(std::memory_order_relaxed);
    out->retries = retries_.load(std::memory_order_relaxed);
    out->num_engines = ctx_->attached().num_engines;
    out->num_wqs = 1;
}

}  // namespace deputy::client
