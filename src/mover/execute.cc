#include "mover/execute.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/futex.h"
#include "common/log.h"
#include "mover/dif.h"
#include "mover/kernels.h"
#include "mover/names.h"

namespace deputy::mover {
namespace {

using kernels::Store;

OpResult fail(uint8_t status) {
    OpResult r;
    r.status = status;
    return r;
}

bool overlaps(const void *a, uint64_t a_len, const void *b, uint64_t b_len) {
    auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x < y + b_len && y < x + a_len;
}

// Which fields an opcode reads; everything else must be zero so that a
// client cannot smuggle state through fields a later version will use.
// (dtype, redop and op_flags byte by byte: dif.cc decides which flag bytes
// a DIF opcode reads.)
struct FieldUse {
    bool src, dst, src2, aux, dtype, redop, op_flags;
};

bool field_use(uint8_t opcode, FieldUse *use) {
    constexpr bool o = true, _ = false;
    switch (opcode) {
        //                                   src dst src2 aux dtype redop op_flags
        case DP_OP_NOOP: *use = {_, _, _, _, _, _, _}; return true;
        case DP_OP_MEMMOVE: *use = {o, o, _, _, _, _, _}; return true;
        case DP_OP_FILL: *use = {_, o, o, _, _, _, _}; return true;
        case DP_OP_COMPARE: *use = {o, _, o, _, _, _, _}; return true;
        case DP_OP_COMPARE_PATTERN: *use = {o, _, o, _, _, _, _}; return true;
        case DP_OP_CREATE_DELTA: *use = {o, o, o, o, _, _, _}; return true;
        case DP_OP_APPLY_DELTA: *use = {o, o, _, o, _, _, _}; return true;
        case DP_OP_DUALCAST: *use = {o, o, o, _, _, _, _}; return true;
        case DP_OP_CRC32C: *use = {o, _, o, _, _, _, _}; return true;
        case DP_OP_COPY_CRC32C: *use = {o, o, o, _, _, _, _}; return true;
        case DP_OP_DIF_CHECK: *use = {o, _, o, _, o, o, o}; return true;
        case DP_OP_DIF_INSERT: *use = {o, o, _, o, o, o, o}; return true;
        case DP_OP_DIF_STRIP: *use = {o, o, o, _, o, o, o}; return true;
        case DP_OP_DIF_UPDATE: *use = {o, o, o, o, o, o, o}; return true;
        case DP_OP_CACHE_FLUSH: *use = {_, o, _, _, _, _, _}; return true;
        case DP_OP_REDUCE: *use = {o, o, o, _, o, o, _}; return true;
        default: return false;
    }
}

uint8_t check_flags(const dp_desc_t &d, bool in_batch) {
    if (d.flags & ~uint32_t(DP_FLAG_ALL)) return DP_COMP_INVALID_FLAGS;
    if ((d.flags & DP_FLAG_CACHED) && (d.flags & DP_FLAG_NONTEMPORAL)) return DP_COMP_INVALID_FLAGS;
    if ((d.flags & DP_FLAG_FENCE) && !in_batch) return DP_COMP_INVALID_FLAGS;
    if ((d.flags & DP_FLAG_ACCUMULATE) && d.opcode != DP_OP_REDUCE) return DP_COMP_INVALID_FLAGS;
    return DP_COMP_SUCCESS;
}

uint8_t check_size(const dp_desc_t &d, const ExecLimits &limits) {
    switch (d.opcode) {
        case DP_OP_NOOP:
            return d.size == 0 ? DP_COMP_SUCCESS : DP_COMP_INVALID_SIZE;
        case DP_OP_CREATE_DELTA:
            if (d.aux == 0 || d.aux % DP_DELTA_ENTRY_SIZE != 0) return DP_COMP_INVALID_SIZE;
            [[fallthrough]];
        case DP_OP_APPLY_DELTA:
            // A record holds at most one entry per granule of dst (what
            // CREATE_DELTA makes): this bounds the copy the kernel takes.
            if (d.opcode == DP_OP_APPLY_DELTA &&
                (d.aux % DP_DELTA_ENTRY_SIZE != 0 || d.aux > d.size / 8 * DP_DELTA_ENTRY_SIZE))
                return DP_COMP_INVALID_SIZE;
            if (d.size % 8 != 0 || d.size > DP_DELTA_MAX_SIZE) return DP_COMP_INVALID_SIZE;
            break;
        case DP_OP_REDUCE: {
            size_t esize = mover::dtype_size(d.dtype);
            if (esize == 0 || !mover::op_applies(d.dtype, d.redop)) return DP_COMP_INVALID_FIELD;
            if (d.size % esize != 0) return DP_COMP_INVALID_SIZE;
            break;
        }
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: {
            DifShape shape;
            if (uint8_t s = dif_shape(d, &shape); s != DP_COMP_SUCCESS) return s;
            break;
        }
        default:
            break;
    }
    if (d.size == 0 || d.size > limits.max_transfer_size) return DP_COMP_INVALID_SIZE;
    return DP_COMP_SUCCESS;
}

Store store_policy(const dp_desc_t &d, const ExecLimits &limits) {
    if (d.flags & DP_FLAG_CACHED) return Store::cached;
    if (d.flags & DP_FLAG_NONTEMPORAL) return Store::nontemporal;
    return d.size >= limits.nt_threshold ? Store::nontemporal : Store::cached;
}

// A DIF descriptor's ranges: its shape's (dif.h), checked in validate().
uint8_t translate_dif(const dp_desc_t &d, const AddressSpace &space, Buffers *b) {
    const DifShape shape = checked_dif_shape(d);
    b->src = space.translate(d.src, shape.src_bytes, Access::read);
    if (!b->src) return DP_COMP_ADDRESS_DENIED;
    if (d.opcode == DP_OP_DIF_CHECK) return DP_COMP_SUCCESS;
    b->dst = space.translate(d.dst, shape.dst_bytes, Access::write);
    if (!b->dst) return DP_COMP_ADDRESS_DENIED;
    return overlaps(b->src, shape.src_bytes, b->dst, shape.dst_bytes) ? DP_COMP_OVERLAP
                                                                       : DP_COMP_SUCCESS;
}

// Runs a checked DIF descriptor with the kernels.
void run_dif(const dp_desc_t &d, const Buffers &b, OpResult *r) {
    const DifShape shape = checked_dif_shape(d);
    const kernels::DifOutcome out = kernels::dif(dif_job(d, shape), b.src, b.dst, shape.blocks);
    r->value = out.next_tags;
    if (out.error != 0) {
        r->status = DP_COMP_DIF_ERROR;
        r->result = out.error;
        r->bytes = out.blocks * (shape.src_bytes / shape.blocks);
    }
}

uint8_t translate(const dp_desc_t &d, const AddressSpace &space, Buffers *b) {
    auto get = [&](uint64_t addr, uint64_t len, Access access) {
        return space.translate(addr, len, access);
    };
    const uint64_t n = d.size;
    switch (d.opcode) {
        case DP_OP_NOOP: return DP_COMP_SUCCESS;
        case DP_OP_MEMMOVE:
        case DP_OP_COPY_CRC32C:
            b->src = get(d.src, n, Access::read);
            b->dst = get(d.dst, n, Access::write);
            if (!b->src || !b->dst) return DP_COMP_ADDRESS_DENIED;
            if (d.opcode == DP_OP_COPY_CRC32C && overlaps(b->src, n, b->dst, n))
                return DP_COMP_OVERLAP;
            return DP_COMP_SUCCESS;
        case DP_OP_FILL:
        case DP_OP_CACHE_FLUSH:
            b->dst = get(d.dst, n, Access::write);
            return b->dst ? DP_COMP_SUCCESS : DP_COMP_ADDRESS_DENIED;
        case DP_OP_COMPARE:
            b->src = get(d.src, n, Access::read);
            b->src2 = get(d.src2, n, Access::read);
            return b->src && b->src2 ? DP_COMP_SUCCESS : DP_COMP_ADDRESS_DENIED;
        case DP_OP_COMPARE_PATTERN:
        case DP_OP_CRC32C:
            b->src = get(d.src, n, Access::read);
            return b->src ? DP_COMP_SUCCESS : DP_COMP_ADDRESS_DENIED;
        case DP_OP_CREATE_DELTA:
            b->src = get(d.src, n, Access::read);
            b->src2 = get(d.src2, n, Access::read);
            b->dst = get(d.dst, d.aux, Access::write);
            if (!b->src || !b->src2 || !b->dst) return DP_COMP_ADDRESS_DENIED;
            if (overlaps(b->dst, d.aux, b->src, n) || overlaps(b->dst, d.aux, b->src2, n))
                return DP_COMP_OVERLAP;
            return DP_COMP_SUCCESS;
        case DP_OP_APPLY_DELTA:
            b->src = d.aux ? get(d.src, d.aux, Access::read) : reinterpret_cast<void *>(1);
            b->dst = get(d.dst, n, Access::write);
            if (!b->src || !b->dst) return DP_COMP_ADDRESS_DENIED;
            if (d.aux && overlaps(b->src, d.aux, b->dst, n)) return DP_COMP_OVERLAP;
            return DP_COMP_SUCCESS;
        case DP_OP_DUALCAST:
            b->src = get(d.src, n, Access::read);
            b->dst = get(d.dst, n, Access::write);
            b->dst2 = get(d.src2, n, Access::write);
            if (!b->src || !b->dst || !b->dst2) return DP_COMP_ADDRESS_DENIED;
            if (overlaps(b->src, n, b->dst, n) || overlaps(b->src, n, b->dst2, n) ||
                overlaps(b->dst, n, b->dst2, n))
                return DP_COMP_OVERLAP;
            return DP_COMP_SUCCESS;
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: return translate_dif(d, space, b);
        case DP_OP_REDUCE: {
            bool accumulate = d.flags & DP_FLAG_ACCUMULATE;
            b->src = get(d.src, n, Access::read);
            b->dst = get(d.dst, n, Access::write);
            b->src2 = accumulate ? b->dst : get(d.src2, n, Access::read);
            if (!b->src || !b->dst || !b->src2) return DP_COMP_ADDRESS_DENIED;
            // In place (dst == a source) is fine; a partial overlap would read
            // elements already overwritten.
            if ((b->dst != b->src && overlaps(b->dst, n, b->src, n)) ||
                (b->dst != b->src2 && overlaps(b->dst, n, b->src2, n)))
                return DP_COMP_OVERLAP;
            return DP_COMP_SUCCESS;
        }
        default: return DP_COMP_INVALID_OPCODE;
    }
}

uint8_t validate(const dp_desc_t &d, const ExecLimits &limits, bool in_batch) {
    FieldUse use;
    if (!field_use(d.opcode, &use)) return DP_COMP_INVALID_OPCODE;
    if (uint8_t s = check_flags(d, in_batch); s != DP_COMP_SUCCESS) return s;
    if ((!use.src && d.src) || (!use.dst && d.dst) || (!use.src2 && d.src2) ||
        (!use.aux && d.aux) || (!use.dtype && d.dtype) || (!use.redop && d.redop) ||
        (!use.op_flags && d.op_flags))
        return DP_COMP_INVALID_FIELD;
    if ((d.opcode == DP_OP_CRC32C || d.opcode == DP_OP_COPY_CRC32C) && d.src2 > UINT32_MAX)
        return DP_COMP_INVALID_FIELD;  // the seed is a 32-bit CRC
    if (d.opcode == DP_OP_REDUCE && (d.flags & DP_FLAG_ACCUMULATE) && d.src2 != 0)
        return DP_COMP_INVALID_FIELD;
    return check_size(d, limits);
}

OpResult run(const dp_desc_t &d, const Buffers &b, const ExecLimits &limits) {
    OpResult r;
    r.bytes = d.size;
    const Store store = store_policy(d, limits);
    // On a DSA queue when the device takes it (idxd/hw_queue.h); the
    // kernels below when it does not, or when the device failed it.
    if (limits.hw != nullptr && limits.hw->offloads(d, b) && limits.hw->run(d, b, store, &r))
        return r;
    switch (d.opcode) {
        case DP_OP_NOOP: break;
        case DP_OP_MEMMOVE: kernels::move(b.dst, b.src, d.size, store); break;
        case DP_OP_FILL: kernels::fill(b.dst, d.src2, d.size, store); break;
        case DP_OP_COMPARE:
        case DP_OP_COMPARE_PATTERN: {
            size_t at = d.opcode == DP_OP_COMPARE ? kernels::compare(b.src, b.src2, d.size)
                                                  : kernels::compare_pattern(b.src, d.src2, d.size);
            if (at != d.size) {
                r.status = DP_COMP_FALSE_PREDICATE;
                r.result = 1;
                r.value = at;
            }
            break;
        }
        case DP_OP_CREATE_DELTA: {
            size_t record = kernels::create_delta(b.src, b.src2, d.size, b.dst, d.aux);
            if (record == SIZE_MAX) return fail(DP_COMP_DELTA_OVERFLOW);
            r.value = record;
            r.result = record != 0;
            // mover.h: a non-empty delta is "success with false predicate".
            if (record != 0) r.status = DP_COMP_FALSE_PREDICATE;
            break;
        }
        case DP_OP_APPLY_DELTA:
            if (!kernels::apply_delta(b.dst, d.size, b.src, d.aux)) return fail(DP_COMP_INVALID_FIELD);
            r.value = d.aux;
            break;
        case DP_OP_DUALCAST: kernels::dualcast(b.dst, b.dst2, b.src, d.size, store); break;
        case DP_OP_CRC32C: r.value = kernels::crc32c(uint32_t(d.src2), b.src, d.size); break;
        case DP_OP_COPY_CRC32C:
            r.value = kernels::copy_crc32c(b.dst, b.src, d.size, uint32_t(d.src2), store);
            break;
        case DP_OP_CACHE_FLUSH:
            kernels::cache_flush(b.dst, d.size, (d.flags & DP_FLAG_CACHED) != 0);
            break;
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: run_dif(d, b, &r); break;
        case DP_OP_REDUCE: {
            size_t count = d.size / mover::dtype_size(d.dtype);
            // ACCUMULATE is dst = dst op src: the order matters for min/max
            // with NaN or signed zeros, so dst is the left operand.
            if (d.flags & DP_FLAG_ACCUMULATE)
                kernels::reduce(b.dst, b.dst, b.src, count, dp_dtype_t(d.dtype), dp_op_t(d.redop));
            else
                kernels::reduce(b.dst, b.src, b.src2, count, dp_dtype_t(d.dtype), dp_op_t(d.redop));
            break;
        }
    }
    return r;
}

OpResult execute_one(const dp_desc_t &d, const AddressSpace &space, const ExecLimits &limits,
                     bool in_batch) {
    if (uint8_t s = validate(d, limits, in_batch); s != DP_COMP_SUCCESS) return fail(s);
    Buffers buffers;
    if (uint8_t s = translate(d, space, &buffers); s != DP_COMP_SUCCESS) return fail(s);
    return run(d, buffers, limits);
}

// mover.h, DP_FLAG_FENCE: after a failure neither the fenced member nor any
// later one runs (DSA abandons the rest of the batch). `abandoned` counts
// the members already abandoned; `batch` holds the failures so far.
bool fenced_off(const dp_desc_t &member, const OpResult &batch, uint64_t abandoned) {
    return abandoned != 0 || ((member.flags & DP_FLAG_FENCE) && batch.member_failures != 0);
}

// Members i.. of a batch that the DSA queue takes, run as one DSA batch
// descriptor: at least two consecutive members, each with its record,
// checked and translated. Returns how many were taken and finished (0:
// member i goes the ordinary way). A member the device faulted on or failed
// runs alone afterwards; one it abandoned after such a member runs too,
// unless the mover's own fence rule abandons it.
template <typename Finish>
uint64_t run_on_device(const dp_desc_t &d, const void *array, uint64_t i, const AddressSpace &space,
                       const ExecLimits &limits, OpResult *batch, uint64_t *abandoned,
                       Finish &&finish) {
    struct Member {
        dp_desc_t desc;
        dp_completion_t *record;
    };
    thread_local std::vector<Member> members;
    thread_local std::vector<Offload::BatchMember> device;
    members.clear();
    device.clear();
    const uint64_t most = std::min<uint64_t>(d.size - i, limits.hw->max_batch_size());
    for (uint64_t k = 0; k < most; ++k) {
        Member m;
        std::memcpy(&m.desc, static_cast<const char *>(array) + (i + k) * sizeof(dp_desc_t),
                    sizeof(m.desc));
        bool record_ok = true;
        m.record = resolve_completion(m.desc, space, &record_ok);
        Buffers b;
        if (!record_ok || m.desc.opcode == DP_OP_BATCH || m.desc.opcode == DP_OP_DRAIN ||
            (k == 0 && fenced_off(m.desc, *batch, *abandoned)) ||
            validate(m.desc, limits, /*in_batch=*/true) != DP_COMP_SUCCESS ||
            translate(m.desc, space, &b) != DP_COMP_SUCCESS || !limits.hw->batchable(m.desc, b))
            break;
        members.push_back(m);
        device.push_back({nullptr, b, store_policy(m.desc, limits)});
    }
    if (members.size() < 2) return 0;
    for (size_t k = 0; k < members.size(); ++k) device[k].desc = &members[k].desc;
    thread_local std::vector<OpResult> results;
    thread_local std::vector<Offload::MemberOutcome> outcomes;
    results.assign(members.size(), OpResult{});
    outcomes.assign(members.size(), Offload::MemberOutcome::again);
    limits.hw->run_batch(device.data(), device.size(), results.data(), outcomes.data());
    for (size_t k = 0; k < members.size(); ++k) {
        const dp_desc_t &member = members[k].desc;
        OpResult r;
        if (fenced_off(member, *batch, *abandoned)) {
            r = fail(DP_COMP_ABANDONED);
            ++*abandoned;
        } else if (outcomes[k] == Offload::MemberOutcome::done) {
            r = results[k];
            batch->member_bytes += r.bytes;
        } else {
            r = execute_one(member, space, limits, /*in_batch=*/true);
            batch->member_bytes += r.bytes;
        }
        finish(member, members[k].record, r);
    }
    return members.size();
}

OpResult execute_batch(const dp_desc_t &d, const AddressSpace &space, const ExecLimits &limits) {
    if (d.flags & ~uint32_t(DP_FLAG_COMPLETION)) return fail(DP_COMP_INVALID_FLAGS);
    if (d.dst || d.src2 || d.aux || d.dtype || d.redop || d.op_flags)
        return fail(DP_COMP_INVALID_FIELD);
    if (d.size == 0 || d.size > limits.max_batch_size) return fail(DP_COMP_INVALID_BATCH);
    const void *array = space.translate(d.src, d.size * sizeof(dp_desc_t), Access::read);
    if (array == nullptr) return fail(DP_COMP_ADDRESS_DENIED);
    OpResult batch;
    uint64_t abandoned = 0;
    auto finish = [&](const dp_desc_t &member, dp_completion_t *record, const OpResult &r) {
        ++batch.members;
        if (!is_success(r.status)) ++batch.member_failures;
        if (record) publish_completion(record, r, member.user);
    };
    for (uint64_t i = 0; i < d.size;) {
        // On a DSA queue, the members from here that it takes go to it as
        // one batch descriptor.
        if (limits.hw != nullptr && abandoned == 0) {
            const uint64_t taken =
                run_on_device(d, array, i, space, limits, &batch, &abandoned, finish);
            if (taken != 0) {
                i += taken;
                continue;
            }
        }
        // Copy the member first: the submitter may rewrite its array while we
        // run (by mistake or on purpose); we act on one consistent snapshot.
        dp_desc_t member;
        std::memcpy(&member, static_cast<const char *>(array) + i * sizeof(dp_desc_t), sizeof(member));
        ++i;
        bool record_ok = true;
        dp_completion_t *record = resolve_completion(member, space, &record_ok);
        OpResult r;
        if (!record_ok) {
            r = fail(DP_COMP_ADDRESS_DENIED);
        } else if (fenced_off(member, batch, abandoned)) {
            r = fail(DP_COMP_ABANDONED);
            ++abandoned;
        } else if (member.opcode == DP_OP_BATCH || member.opcode == DP_OP_DRAIN) {
            r = fail(DP_COMP_INVALID_OPCODE);
        } else {
            r = execute_one(member, space, limits, /*in_batch=*/true);
            batch.member_bytes += r.bytes;
        }
        finish(member, record, r);
    }
    batch.status = batch.member_failures ? DP_COMP_BATCH_FAILED : DP_COMP_SUCCESS;
    batch.result = uint32_t(batch.member_failures);
    // mover.h: a batch's bytes_completed counts the members completed (all
    // but the abandoned ones, like DSA's "descriptors completed"); the bytes
    // they moved go to the device counters through member_bytes.
    batch.bytes = batch.members - abandoned;
    return batch;
}

}  // namespace

dp_completion_t *resolve_completion(const dp_desc_t &desc, const AddressSpace &space, bool *ok) {
    *ok = true;
    if (!(desc.flags & DP_FLAG_COMPLETION)) return nullptr;
    if (desc.completion % alignof(dp_completion_t) != 0) {
        *ok = false;
        return nullptr;
    }
    auto *record = static_cast<dp_completion_t *>(
        space.translate(desc.completion, sizeof(dp_completion_t), Access::record));
    if (record == nullptr) *ok = false;
    return record;
}

void publish_completion(dp_completion_t *record, const OpResult &result, uint64_t user) {
    record->result = result.result;
    record->bytes_completed = result.bytes;
    record->value = result.value;
    record->user = user;
    // The first word holds status, waiter and reserved. One release exchange
    // publishes the status (after the fields above) and tells us whether a
    // waiter announced itself before sleeping (see wait.cc).
    auto *word = reinterpret_cast<uint32_t *>(record);
    uint32_t before = __atomic_exchange_n(word, uint32_t(result.status), __ATOMIC_RELEASE);
    if (before & 0xff00u) futex_wake(word, INT32_MAX);
}

OpResult execute(const dp_desc_t &desc, const AddressSpace &space, const ExecLimits &limits) {
    if (desc.opcode == DP_OP_BATCH) return execute_batch(desc, space, limits);
    return execute_one(desc, space, limits, /*in_batch=*/false);
}

bool AddressSpace::run(const dp_desc_t &desc, const ExecLimits &limits, OpResult *result) const {
    bool record_ok = true;
    dp_completion_t *record = resolve_completion(desc, *this, &record_ok);
    if (!record_ok) return false;
    *result = execute(desc, *this, limits);
    if (record) publish_completion(record, *result, desc.user);
    return true;
}

void AddressSpace::report_lost(const dp_desc_t &desc, const char *queue) const {
    DP_LOG_ERROR("{}: completion address {:#x} is misaligned or outside the submitter's memory; "
                 "descriptor ({}) not executed",
                 queue, desc.completion, mover::opcode_name(desc.opcode));
}

}  // namespace deputy::mover
