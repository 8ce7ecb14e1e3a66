#include "agent/coll_tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace deputy::agent {

uint8_t *MemberBuffers::agent(const coll::Piece &p, uint64_t len) const {
    uint8_t *base = p.where == coll::Where::agent_send ? send : recv;
    const uint64_t size = p.where == coll::Where::agent_send ? send_bytes : recv_bytes;
    if (!base || p.offset > size || len > size - p.offset) return nullptr;
    return base + p.offset;
}

uint8_t *MemberBuffers::in_place(const coll::Piece &p, uint64_t len, bool write) const {
    if (p.where == coll::Where::agent_send || p.where == coll::Where::agent_recv)
        return agent(p, len);
    if (p.rank >= members.size() || !members[p.rank].space) return nullptr;
    const Member &m = members[p.rank];
    const uint64_t base = p.where == coll::Where::source ? m.src : m.dst;
    return static_cast<uint8_t *>(m.space->translate(
        base + p.offset, len, write ? mover::Access::write : mover::Access::read));
}

bool MemberBuffers::copy_in(const coll::Piece &p, void *out, uint64_t len,
                            std::string *why) const {
    if (const uint8_t *q = in_place(p, len, false)) return std::memcpy(out, q, len), true;
    if (p.rank >= members.size() || !members[p.rank].space)
        return *why = fmt::format("rank {} is not a member here", p.rank), false;
    const Member &m = members[p.rank];
    const uint64_t base = p.where == coll::Where::source ? m.src : m.dst;
    return m.space->read(base + p.offset, out, len, why);
}

bool MemberBuffers::copy_out(const coll::Piece &p, const void *in, uint64_t len,
                             std::string *why) const {
    if (uint8_t *q = in_place(p, len, true)) return std::memcpy(q, in, len), true;
    if (p.rank >= members.size() || !members[p.rank].space)
        return *why = fmt::format("rank {} is not a member here", p.rank), false;
    const Member &m = members[p.rank];
    return m.space->write(m.dst + p.offset, in, len, why);
}

bool MemberBuffers::member_gone() const {
    return std::any_of(members.begin(), members.end(),
                       [](const Member &m) { return m.space && !m.space->process().alive(); });
}

bool CollTaskSpace::run(const dp_desc_t &desc, const mover::ExecLimits &,
                        mover::OpResult *result) const {
    auto *ctx = reinterpret_cast<TaskContext *>(desc.src);
    const coll::Task &task = ctx->plan->tasks[ctx->task];
    *result = {};
    result->status = coll::run_task(*ctx->plan, task, *ctx->buffers, &ctx->why);
    result->bytes = task.bytes * std::max<uint32_t>(task.outputs, 1);
    auto *record = reinterpret_cast<dp_completion_t *>(desc.completion);
    mover::publish_completion(record, *result, desc.user);  // the last touch of ctx's memory
    return true;
}

void TaskSet::reset(const coll::LocalPlan *plan, std::vector<uint32_t> group_of_task,
                    uint32_t groups, const coll::TaskBuffers *buffers) {
    plan_ = plan;
    const size_t n = plan->tasks.size();
    group_of_task_ = std::move(group_of_task);
    if (group_of_task_.empty()) group_of_task_.assign(n, 0);
    left_in_group_.assign(std::max<uint32_t>(groups, 1), 0);
    for (uint32_t g : group_of_task_) ++left_in_group_[g];
    enabled_.assign(left_in_group_.size(), false);
    contexts_.assign(n, TaskContext{});
    for (size_t i = 0; i < n; ++i) contexts_[i] = {plan, uint32_t(i), buffers, {}};
    records_.reset(new dp_completion_t[n ? n : 1]());
    in_flight_.clear();
    empty_enabled_.clear();
    next_ = finished_ = 0;
    status_ = DP_COMP_SUCCESS;
    why_.clear();
}

void TaskSet::enable(uint32_t group) {
    if (group >= enabled_.size() || enabled_[group]) return;
    enabled_[group] = true;
    if (left_in_group_[group] == 0) empty_enabled_.push_back(group);
}

void TaskSet::enable_all() {
    for (uint32_t g = 0; g < enabled_.size(); ++g) enable(g);
}

void TaskSet::pump(mover::Device &device, uint32_t wq, uint32_t pasid, size_t window) {
    if (failed()) return;
    // Tasks go in plan order; a task of a group not enabled yet waits, and
    // so does everything after it (groups are enabled in order).
    while (next_ < contexts_.size() && in_flight_.size() < window &&
           enabled_[group_of_task_[next_]]) {
        dp_desc_t d{};
        d.opcode = DP_OP_NOOP;
        d.flags = DP_FLAG_COMPLETION;
        d.completion = reinterpret_cast<uint64_t>(&records_[next_]);
        d.src = reinterpret_cast<uint64_t>(&contexts_[next_]);
        if (device.submit(wq, d, pasid) != DP_OK) return;  // full: the rest next turn
        in_flight_.push_back(uint32_t(next_++));
    }
}

std::vector<uint32_t> TaskSet::poll() {
    std::vector<uint32_t> completed = std::exchange(empty_enabled_, {});
    for (size_t i = 0; i < in_flight_.size();) {
        const uint32_t t = in_flight_[i];
        const uint8_t st = __atomic_load_n(&records_[t].status, __ATOMIC_ACQUIRE);
        if (st == DP_COMP_PENDING) {
            ++i;
            continue;
        }
        in_flight_[i] = in_flight_.back();
        in_flight_.pop_back();
        ++finished_;
        if (st != DP_COMP_SUCCESS && status_ == DP_COMP_SUCCESS) {
            status_ = st;
            why_ = contexts_[t].why;
        }
        if (--left_in_group_[group_of_task_[t]] == 0) completed.push_back(group_of_task_[t]);
    }
    return completed;
}

dp_completion_t *TaskSet::pending() const {
    for (uint32_t t : in_flight_)
        if (__atomic_load_n(&records_[t].status, __ATOMIC_ACQUIRE) == DP_COMP_PENDING)
            return &records_[t];
    return nullptr;
}

}  // namespace deputy::agent
