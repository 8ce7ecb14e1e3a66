#include "coll/transport/memory/task_runner.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "common/scratch.h"
#include "mover/kernels.h"

namespace deputy::coll {
namespace {

bool overlaps(const uint8_t *a, const uint8_t *b, uint64_t n) { return a < b + n && b < a + n; }

// Up to this many pieces a task compares them pairwise; above, it sorts
// them first. A 4-byte alltoall among 300 members packs 65536 pieces into a
// task: pairwise, one such operation took 37 s on the agent's engines.
constexpr size_t kFewPieces = 32;

// The bytes of every input, in place or in scratch, each read once. One
// per thread, reused: a small operation's tasks run back to back on the
// service thread, where two allocations per task were a measurable part
// of an 8-byte collective.
struct Inputs {
    std::vector<const uint8_t *> at;
    std::vector<scratch::Buffer> copies;
    size_t used = 0;  // of copies.back()
    // Room for a copy of `bytes`, 64-byte aligned, nullptr when out of
    // memory. Copies share buffers: a task of thousands of small pieces
    // takes a few, not a mapping each.
    uint8_t *room(uint64_t bytes) {
        const uint64_t need = (bytes + 63) / 64 * 64;
        if (copies.empty() || copies.back().size() - used < need) {
            scratch::Buffer b = scratch::get(std::max<uint64_t>(need, 64 << 10));
            if (!b.data()) return nullptr;
            copies.push_back(std::move(b));
            used = 0;
        }
        uint8_t *p = copies.back().data() + used;
        used += need;
        return p;
    }
};

bool read_inputs(const LocalPlan &plan, const Task &t, const TaskBuffers &buffers, Inputs *in,
                 std::string *why) {
    const auto pieces = plan.inputs(t);
    in->at.assign(pieces.size(), nullptr);
    // A piece named twice is read once.
    thread_local std::vector<uint32_t> first;
    const bool many = t.repeats && pieces.size() > kFewPieces;
    if (many) first_equal(pieces, &first);
    for (size_t i = 0; i < pieces.size(); ++i) {
        if (many) {
            if (first[i] != i) in->at[i] = in->at[first[i]];
        } else if (t.repeats) {
            for (size_t j = 0; j < i && !in->at[i]; ++j)
                if (pieces[j] == pieces[i]) in->at[i] = in->at[j];
        }
        if (in->at[i]) continue;
        if (const uint8_t *p = buffers.in_place(pieces[i], t.bytes, false)) {
            in->at[i] = p;
            continue;
        }
        uint8_t *copy = in->room(t.bytes);
        if (!copy) return *why = "the agent is out of memory", false;
        if (!buffers.copy_in(pieces[i], copy, t.bytes, why)) return false;
        in->at[i] = copy;
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
    // An output written from its own input at the same place changes
    // nothing (a broadcast's one input writes every output).
    auto clobbers = [&](const uint8_t *dst, size_t k, size_t i) {
        const bool itself = dst == in->at[i] && (in->at.size() == 1 || k == i);
        return dst && !itself && overlaps(dst, in->at[i], t.bytes);
    };
    // Many pieces: the outputs written in place, by address, and each
    // input looks only at those within t.bytes of it.
    thread_local std::vector<std::pair<uintptr_t, uint32_t>> written;
    const bool many = outs.size() > kFewPieces;
    if (many) {
        written.clear();
        for (size_t k = 0; k < outs.size(); ++k)
            if (buffers.writes(outs[k]))
                if (const uint8_t *dst = buffers.in_place(outs[k], t.bytes, true))
                    written.emplace_back(reinterpret_cast<uintptr_t>(dst), uint32_t(k));
        std::sort(written.begin(), written.end());
    }
    for (size_t i = 0; i < in->at.size(); ++i) {
        bool clobbered = false;
        if (many) {
            const uintptr_t at = reinterpret_cast<uintptr_t>(in->at[i]);
            const uintptr_t low = at > t.bytes ? at - t.bytes + 1 : 0;
            for (auto w = std::lower_bound(written.begin(), written.end(),
                                           std::pair<uintptr_t, uint32_t>(low, 0));
                 w != written.end() && w->first < at + t.bytes && !clobbered; ++w)
                clobbered = clobbers(reinterpret_cast<const uint8_t *>(w->first), w->second, i);
        } else {
            for (size_t k = 0; k < outs.size() && !clobbered; ++k)
                if (buffers.writes(outs[k]))
                    clobbered = clobbers(buffers.in_place(outs[k], t.bytes, true), k, i);
        }
        if (!clobbered) continue;
        uint8_t *copy = in->room(t.bytes);
        if (!copy) return *why = "the agent is out of memory", false;
        std::memcpy(copy, in->at[i], t.bytes);
        in->at[i] = copy;
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
        ~Release() {
            in.copies.clear();
            in.used = 0;
        }
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
