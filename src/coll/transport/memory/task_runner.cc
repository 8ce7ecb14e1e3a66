#include "coll/transport/memory/task_runner.h"

#include <cstring>
#include <span>
#include <vector>

#include "common/scratch.h"
#include "mover/kernels.h"

namespace deputy::coll {
namespace {

bool overlaps(const uint8_t *a, const uint8_t *b, uint64_t n) { return a < b + n && b < a + n; }

// The bytes of every input, in place or in scratch, each read once. One
// per thread, reused: a small operation's tasks run back to back on the
// service thread, where two allocations per task were a measurable part
// of an 8-byte collective.
struct Inputs {
    std::vector<const uint8_t *> at;
    std::vector<scratch::Buffer> copies;
};

bool read_inputs(const LocalPlan &plan, const Task &t, const TaskBuffers &buffers, Inputs *in,
                 std::string *why) {
    const auto pieces = plan.inputs(t);
    in->at.assign(pieces.size(), nullptr);
    for (size_t i = 0; i < pieces.size(); ++i) {
        for (size_t j = 0; j < i && !in->at[i]; ++j)  // a piece named twice is read once
            if (pieces[j] == pieces[i]) in->at[i] = in->at[j];
        if (in->at[i]) continue;
        if (const uint8_t *p = buffers.in_place(pieces[i], t.bytes, false)) {
            in->at[i] = p;
            continue;
        }
        scratch::Buffer b = scratch::get(t.bytes);
        if (!b.data()) return *why = "the agent is out of memory", false;
        if (!buffers.copy_in(pieces[i], b.data(), t.bytes, why)) return false;
        in->at[i] = b.data();
        in->copies.push_back(std::move(b));
    }
    return true;
}

// Writes `bytes` to every output, skipping one that is already them.
bool write_outputs(const LocalPlan &plan, const Task &t, const TaskBuffers &buffers,
                   std::span<const uint8_t *const> from, std::string *why) {
    const auto pieces = plan.outputs(t);
    for (size_t k = 0; k < pieces.size(); ++k) {
        if (!buffers.writes(pieces[k])) continue;
        const uint8_t *src = from.size() == 1 ? from[0] : from[k];
        if (uint8_t *dst = buffers.in_place(pieces[k], t.bytes, true)) {
            if (dst != src) std::memmove(dst, src, t.bytes);
        } else if (!buffers.copy_out(pieces[k], src, t.bytes, why)) {
            return false;
        }
    }
    return true;
}

// In place, a move's input may be another move's output in the same task
// (two blocks that swap): such inputs are copied aside before any write.
bool protect_inputs(const LocalPlan &plan, const Task &t, const TaskBuffers &buffers,
                    Inputs *in, std::string *why) {
    const auto outs = plan.outputs(t);
    for (size_t i = 0; i < in->at.size(); ++i) {
        bool clobbered = false;
        for (size_t k = 0; k < outs.size() && !clobbered; ++k) {
            if (!buffers.writes(outs[k])) continue;
            const uint8_t *dst = buffers.in_place(outs[k], t.bytes, true);
            // An output written from its own input at the same place changes
            // nothing (a broadcast's one input writes every output).
            const bool itself = dst == in->at[i] && (in->at.size() == 1 || k == i);
            clobbered = dst && !itself && overlaps(dst, in->at[i], t.bytes);
        }
        if (!clobbered) continue;
        scratch::Buffer b = scratch::get(t.bytes);
        if (!b.data()) return *why = "the agent is out of memory", false;
        std::memcpy(b.data(), in->at[i], t.bytes);
        in->at[i] = b.data();
        in->copies.push_back(std::move(b));
    }
    return true;
}

}  // namespace

bool task_writes(const LocalPlan &plan, const Task &task, const TaskBuffers &buffers) {
    for (const Piece &p : plan.outputs(task))
        if (buffers.writes(p)) return true;
    return false;
}

uint8_t run_task(const LocalPlan &plan, const Task &t, const TaskBuffers &buffers,
                 std::string *why) {
    thread_local Inputs in;
    struct Release {  // the scratch copies go back as the task ends, whatever its end
        Inputs &in;
        ~Release() { in.copies.clear(); }
    } release{in};
    // Nothing is written before every input is in: a read that fails
    // leaves every output untouched. A write that fails may leave the
    // outputs before it written (DP_COMP_PAGE_FAULT says so).
    if (!read_inputs(plan, t, buffers, &in, why)) return DP_COMP_ADDRESS_DENIED;
    if (t.kind == Task::Kind::move) {
        if (!protect_inputs(plan, t, buffers, &in, why)) return DP_COMP_ADDRESS_DENIED;
        return write_outputs(plan, t, buffers, in.at, why) ? DP_COMP_SUCCESS : DP_COMP_PAGE_FAULT;
    }
    // Reduce into the first output written when it is in place and
    // clobbers no input but the first (which the kernel may overwrite as it
    // goes), else into scratch; then to every other output.
    const auto outs = plan.outputs(t);
    uint8_t *acc = nullptr;
    for (size_t k = 0; k < outs.size() && !acc; ++k)
        if (buffers.writes(outs[k])) acc = buffers.in_place(outs[k], t.bytes, true);
    for (size_t i = 1; acc && i < in.at.size(); ++i)
        if (overlaps(acc, in.at[i], t.bytes)) acc = nullptr;
    if (acc && acc != in.at[0] && overlaps(acc, in.at[0], t.bytes)) acc = nullptr;
    scratch::Buffer own;
    if (!acc) {
        own = scratch::get(t.bytes);
        if (!own.data()) return *why = "the agent is out of memory", DP_COMP_ADDRESS_DENIED;
        acc = own.data();
    }
    const uint64_t count = t.bytes / dp_dtype_size(plan.dtype);
    if (in.at.size() == 1) {
        if (acc != in.at[0]) std::memcpy(acc, in.at[0], t.bytes);
    } else {
        mover::kernels::reduce(acc, in.at[0], in.at[1], count, plan.dtype, plan.op);
        for (size_t i = 2; i < in.at.size(); ++i)
            mover::kernels::reduce(acc, acc, in.at[i], count, plan.dtype, plan.op);
    }
    const uint8_t *result = acc;
    return write_outputs(plan, t, buffers, {&result, 1}, why) ? DP_COMP_SUCCESS
                                                              : DP_COMP_PAGE_FAULT;
}

}  // namespace deputy::coll
