// STAGED: a descriptor whose bytes came in the message, run against a
// BounceSpace over those bytes, the result and written ranges sent back.
// Separate from the other requests: it is the only one that executes work.
#include <fmt/format.h>

#include <cstring>

#include "agent/agent.h"
#include "agent/bounce_space.h"
#include "common/log.h"

namespace deputy::agent {

namespace control = channel::control;
using channel::MsgType;

dp_status_t Agent::handle_staged(ClientSession &s, const std::vector<uint8_t> &payload) {
    ++s.counters.staged;
    ++counters_.staged;
    control::Staged m;
    std::string error;
    control::StagedResult out;
    dp_status_t st = control::decode(payload.data(), payload.size(), &m, &error);
    for (const control::StagedRange &r : m.sources)
        if (st == DP_OK && r.bytes.size() > config_.max_staged_bytes) {
            st = DP_ERR_TOO_LARGE;
            error = fmt::format("STAGED: a {}-byte range is above max_staged_bytes {}",
                                r.bytes.size(), config_.max_staged_bytes);
        }
    if (st != DP_OK) {
        out.status = st;
        DP_LOG_LIMITED(s.space().log(), "client {}: {}", s.id, error);
    } else {
        dp_desc_t body = m.desc;
        body.completion = 0;
        body.flags &= ~uint32_t(DP_FLAG_COMPLETION);
        // The client's bytes came with the message: look ranges up there.
        // A destination the client did not send starts zeroed; it is only
        // returned when the descriptor succeeded (then fully written).
        BounceSpace space(
            nullptr, [](uint64_t, uint64_t) { return true; },
            [&m](uint64_t a, uint64_t l, bool for_write, void *dst) {
                for (const control::StagedRange &r : m.sources) {
                    if (a >= r.addr && a - r.addr <= r.bytes.size() &&
                        l <= r.bytes.size() - (a - r.addr)) {
                        std::memcpy(dst, r.bytes.data() + (a - r.addr), l);
                        return true;
                    }
                }
                if (!for_write) return false;
                std::memset(dst, 0, l);
                return true;
            },
            config_.max_staged_bytes * control::kMaxStagedRanges);
        mover::OpResult result;
        if (body.opcode == DP_OP_DRAIN) {
            // Staged descriptors run one at a time: everything before is done.
            result.status = (body.flags || body.src || body.dst || body.src2 || body.size)
                                ? DP_COMP_INVALID_FIELD
                                : DP_COMP_SUCCESS;
        } else {
            result = mover::execute(body, space, limits_);
        }
        mover::publish_completion(&out.record, result, m.desc.user);
        out.record.waiter = 0;
        // A batch member's record after its member's data: the client
        // copies them in this order.
        if (mover::is_success(result.status))
            for (const BounceSpace::Bounce *b : space.write_back_order())
                out.writes.push_back(
                    {b->addr, {b->bytes.data(), b->bytes.data() + b->bytes.size()}});
        if (result.status == DP_COMP_ADDRESS_DENIED) {
            ++s.counters.denied;
            ++counters_.denied;
        }
    }
    std::vector<uint8_t> bytes;
    control::encode(out, &bytes);
    send(s, MsgType::kStagedResult, bytes);
    return DP_OK;
}

}  // namespace deputy::agent
