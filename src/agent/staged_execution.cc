// STAGED: a descriptor whose bytes came in the message, run by an engine on
// a BounceSpace over those bytes, the result and written ranges sent back.
// Separate from the other requests: it is the only one that executes work.
#include "agent/staged_execution.h"

#include <fmt/format.h>

#include <cstring>

#include "agent/agent.h"
#include "agent/bounce_space.h"
#include "common/log.h"
#include "mover/wait.h"

namespace deputy::agent {

namespace control = channel::control;
using channel::MsgType;

dp_desc_t StagedJob::descriptor() const {
    dp_desc_t d{};
    d.opcode = DP_OP_NOOP;
    d.flags = DP_FLAG_COMPLETION;
    d.completion = reinterpret_cast<uint64_t>(&record);
    d.src = reinterpret_cast<uint64_t>(this);
    return d;
}

bool StagedSpace::run(const dp_desc_t &desc, const mover::ExecLimits &,
                      mover::OpResult *result) const {
    auto *job = reinterpret_cast<StagedJob *>(desc.src);
    const control::Staged &m = job->message;
    control::StagedResult out;
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
        job->max_bytes);
    *result = {};
    if (body.opcode == DP_OP_DRAIN) {
        // A client's staged descriptors run one at a time (the next waits
        // for this one's answer): everything before is done.
        result->status = (body.flags || body.src || body.dst || body.src2 || body.size)
                             ? DP_COMP_INVALID_FIELD
                             : DP_COMP_SUCCESS;
    } else {
        *result = mover::execute(body, space, job->limits);
    }
    mover::publish_completion(&out.record, *result, m.desc.user);
    out.record.waiter = 0;
    // A batch member's record after its member's data: the client
    // copies them in this order.
    if (mover::is_success(result->status))
        for (const BounceSpace::Bounce *b : space.write_back_order())
            out.writes.push_back({b->addr, {b->bytes.data(), b->bytes.data() + b->bytes.size()}});
    control::encode(out, &job->reply);
    job->status = result->status;
    // The last touch of the job: from here the service thread may free it.
    mover::publish_completion(&job->record, mover::OpResult{}, 0);
    return true;
}

dp_status_t Agent::handle_staged(ClientSession &s, const std::vector<uint8_t> &payload) {
    ++s.counters.staged;
    ++counters_.staged;
    auto job = std::make_unique<StagedJob>();
    std::string error;
    dp_status_t st = control::decode(payload.data(), payload.size(), &job->message, &error);
    for (const control::StagedRange &r : job->message.sources)
        if (st == DP_OK && r.bytes.size() > config_.max_staged_bytes) {
            st = DP_ERR_TOO_LARGE;
            error = fmt::format("STAGED: a {}-byte range is above max_staged_bytes {}",
                                r.bytes.size(), config_.max_staged_bytes);
        }
    if (st != DP_OK) {
        // Refused: answered now (nothing of this client's is in flight, so
        // the answers stay in request order).
        DP_LOG_LIMITED(s.space().log(), "client {}: {}", s.id, error);
        control::StagedResult out;
        out.status = st;
        std::vector<uint8_t> bytes;
        control::encode(out, &bytes);
        send(s, MsgType::kStagedResult, bytes);
        return DP_OK;
    }
    job->client_id = s.id;
    job->wq = s.wq;
    job->limits = limits_;
    job->max_bytes = config_.max_staged_bytes * control::kMaxStagedRanges;
    // Its later requests wait in the inbox until the answer is out.
    s.awaiting_staged = true;
    staged_jobs_.push_back(std::move(job));
    submit_staged(*staged_jobs_.back());
    return DP_OK;
}

bool Agent::submit_staged(StagedJob &job) {
    if (device_->submit(job.wq, job.descriptor(), staged_pasid_) != DP_OK)
        return false;  // the device queue is full: next turn
    job.submitted = true;
    return true;
}

bool Agent::serve_staged() {
    bool worked = false;
    for (size_t i = 0; i < staged_jobs_.size();) {
        StagedJob &job = *staged_jobs_[i];
        if (!job.submitted) {
            if (!submit_staged(job)) {
                ++i;
                continue;
            }
            worked = true;
        }
        if (!job.done()) {
            ++i;
            continue;
        }
        std::unique_ptr<StagedJob> done = std::move(staged_jobs_[i]);
        staged_jobs_.erase(staged_jobs_.begin() + long(i));
        worked = true;
        finish_staged(*done);  // may add jobs at the end (the client's next request)
    }
    return worked;
}

void Agent::finish_staged(const StagedJob &job) {
    if (job.status == DP_COMP_ADDRESS_DENIED) ++counters_.denied;
    auto it = clients_.find(job.client_id);
    // Gone meanwhile: nobody to answer.
    if (it == clients_.end() || !it->second->awaiting_staged) return;
    ClientSession &s = *it->second;
    if (job.status == DP_COMP_ADDRESS_DENIED) ++s.counters.denied;
    s.awaiting_staged = false;
    send(s, MsgType::kStagedResult, job.reply);
    // What it sent meanwhile is served now, in order.
    if (!serve_inbox(s)) return;  // dropped
    update_epoll(s);
    if (!s.broken.empty()) drop_client(s.id, s.broken, true);
    else if (s.closing && !s.connection.has_output()) drop_client(s.id, s.closing_reason, false);
}

bool Agent::wait_for_staged(int64_t timeout_ns) {
    if (staged_jobs_.empty()) return false;
    for (const auto &job : staged_jobs_)
        if (!job->submitted || job->done()) return true;  // work for the loop now
    mover::wait_completion(&staged_jobs_.front()->record, DP_WAIT_BLOCK, timeout_ns);
    return true;
}

}  // namespace deputy::agent
