#include "mover/idxd/hw_queue.h"

#include <sched.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <x86intrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "common/cpu_relax.h"
#include "common/log.h"
#include "common/timing.h"
#include "mover/dif.h"
#include "mover/names.h"

namespace deputy::mover::idxd {
namespace {

// One completion record per engine thread: an engine has one descriptor on
// the device at a time, and the record must stay where it is until the
// device wrote it (a thread's storage lives as long as the thread).
struct alignas(kRecordAlign) RecordLine {
    dsa_completion_record record;
};
struct alignas(kDescListAlign) DescLine {
    dsa_hw_desc desc;
};
thread_local RecordLine t_record;

// A waiting engine logs a device that has not answered for this long (and
// goes on waiting: the device may still write the buffers it was given).
constexpr uint64_t kSlowDeviceNs = 10'000'000'000;

// UMONITOR/UMWAIT (WAITPKG, CPUID leaf 7 ECX bit 5): the waiting core
// naps in a light C-state until the device's write to the record's line
// wakes it, or ~100k TSC ticks pass. Compiled for CPUs that have it,
// called only after CPUID said so. x86's alone: elsewhere (an Arm build,
// whose queues can only be stand-ins) "block" waits as "yield".
#if defined(__x86_64__)
bool cpu_has_waitpkg() {
    static const bool has = [] {
        unsigned a, b, c, d;
        return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 5) & 1u);
    }();
    return has;
}

__attribute__((target("waitpkg"))) void nap_on(const dsa_completion_record &record) {
    _umonitor(const_cast<uint8_t *>(&record.status));
    if (__atomic_load_n(&record.status, __ATOMIC_ACQUIRE) == 0)
        _umwait(0 /* C0.2: the deeper, slower-to-wake nap */, __rdtsc() + 100'000);
}
#else
bool cpu_has_waitpkg() { return false; }
void nap_on(const dsa_completion_record &) {}
#endif

// Operations a page fault makes start again from the beginning, rather than
// resume from bytes_completed: the delta operations (a record cannot be
// continued) and the DIF ones (a block's tuple follows it; restarting is
// simpler than resuming tags and is idempotent, source and destination
// being disjoint). Submitted whole, never cut at the queue's maximum.
bool restarts_after_fault(uint8_t opcode) {
    return opcode == DP_OP_CREATE_DELTA || opcode == DP_OP_APPLY_DELTA || is_dif(opcode);
}

// Makes the page at `address` present (and writable for a write fault)
// without changing a byte: what the device's page request would have done.
void touch(uint64_t address, bool write) {
    auto *byte = reinterpret_cast<uint8_t *>(address);
    if (write) __atomic_fetch_or(byte, uint8_t(0), __ATOMIC_RELAXED);
    else (void)*static_cast<volatile uint8_t *>(byte);
}

uint8_t dsa_opcode(uint8_t op) {
    switch (op) {
        case DP_OP_MEMMOVE: return DSA_OPCODE_MEMMOVE;
        case DP_OP_FILL: return DSA_OPCODE_MEMFILL;
        case DP_OP_COMPARE: return DSA_OPCODE_COMPARE;
        case DP_OP_COMPARE_PATTERN: return DSA_OPCODE_COMPVAL;
        case DP_OP_CREATE_DELTA: return DSA_OPCODE_CR_DELTA;
        case DP_OP_APPLY_DELTA: return DSA_OPCODE_AP_DELTA;
        case DP_OP_DUALCAST: return DSA_OPCODE_DUALCAST;
        case DP_OP_CRC32C: return DSA_OPCODE_CRCGEN;
        case DP_OP_COPY_CRC32C: return DSA_OPCODE_COPY_CRC;
        case DP_OP_DIF_CHECK: return DSA_OPCODE_DIF_CHECK;
        case DP_OP_DIF_INSERT: return DSA_OPCODE_DIF_INS;
        case DP_OP_DIF_STRIP: return DSA_OPCODE_DIF_STRP;
        case DP_OP_DIF_UPDATE: return DSA_OPCODE_DIF_UPDT;
        case DP_OP_CACHE_FLUSH: return DSA_OPCODE_CFLUSH;
    }
    return DSA_OPCODE_NOOP;
}

uint64_t address(const void *p) { return reinterpret_cast<uint64_t>(p); }

// A DP_DIF_TAGS word into the descriptor's reference tag, application tag
// mask and application tag at `offset`: mover.h packs them as DSA lays them
// out (dsa_abi.h), so the word is those 8 bytes.
void put_tags(dsa_hw_desc *h, size_t offset, uint64_t word) {
    std::memcpy(reinterpret_cast<unsigned char *>(h) + offset, &word, sizeof(word));
}

}  // namespace

HwQueue::HwQueue(std::unique_ptr<Portal> portal, std::unique_ptr<StandInDevice> stand_in,
                 const QueueInfo &queue, dp_wait_mode_t wait)
    : stand_in_(std::move(stand_in)), portal_(std::move(portal)), queue_(queue), wait_(wait) {}

dp_status_t HwQueue::open(const std::string &request, dp_wait_mode_t wait,
                          std::unique_ptr<HwQueue> *out, std::string *why) {
    if (request == "standin" || request == "standin/shared" || request == "standin/dedicated" ||
        request == "standin/inline") {
        QueueInfo q;
        q.device = "standin";
        q.name = request == "standin/shared" ? "shared" : "dedicated";
        q.enabled = true;
        q.type = "user";
        q.mode = request == "standin/shared" ? DP_WQ_SHARED : DP_WQ_DEDICATED;
        StandInDevice::Options options;
        options.inline_execution = request == "standin/inline";
        q.size = options.queue_size;
        q.threshold = q.mode == DP_WQ_SHARED ? q.size : 0;
        q.priority = 10;
        q.max_batch_size = options.max_batch_size;
        q.max_transfer_size = options.max_transfer_size;
        auto device = std::make_unique<StandInDevice>(options);
        auto portal = Portal::stand_in(device.get(), q.mode);
        *out = std::make_unique<HwQueue>(std::move(portal), std::move(device), q, wait);
        return DP_OK;
    }
    QueueInfo q;
    if (dp_status_t s = choose_queue(read_inventory(), request, &q, why); s != DP_OK) return s;
    std::unique_ptr<Portal> portal;
    if (dp_status_t s = Portal::map(q, &portal, why); s != DP_OK) return s;
    *out = std::make_unique<HwQueue>(std::move(portal), nullptr, q, wait);
    return DP_OK;
}

std::string HwQueue::description() const {
    std::string where = !stand_in_ ? queue_.device + "/" + queue_.name
                        : stand_in_->options().inline_execution
                            ? std::string("stand-in device, executing in the portal write")
                            : std::string("stand-in device");
    return where + " (" + (queue_.mode == DP_WQ_SHARED ? "shared" : "dedicated") + ", size " +
           std::to_string(queue_.size) + ")";
}

bool HwQueue::offloads(const dp_desc_t &d, const Buffers &b) const {
    switch (d.opcode) {
        case DP_OP_MEMMOVE: {
            // Overlapping moves stay on the CPU: a move the device finished
            // part of could not be rerun there from its sources.
            auto s = address(b.src), t = address(b.dst);
            return !(s < t + d.size && t < s + d.size);
        }
        case DP_OP_DUALCAST:
            // The device requires both destinations at the same offset in
            // their 4 KiB pages.
            return ((address(b.dst) ^ address(b.dst2)) & 0xfff) == 0;
        case DP_OP_CREATE_DELTA:
        case DP_OP_APPLY_DELTA:
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE:
            return d.size <= queue_.max_transfer_size;
        case DP_OP_FILL:
        case DP_OP_COMPARE:
        case DP_OP_COMPARE_PATTERN:
        case DP_OP_CRC32C:
        case DP_OP_COPY_CRC32C:
        case DP_OP_CACHE_FLUSH:
            return true;
    }
    return false;  // NOOP (nothing to move), REDUCE (deputy's own), BATCH/DRAIN (elsewhere)
}

void HwQueue::submit(const dsa_hw_desc &desc) {
    counters_.submitted.fetch_add(1, std::memory_order_relaxed);
    while (!portal_->submit(desc)) {
        counters_.retries.fetch_add(1, std::memory_order_relaxed);
        cpu_relax();
    }
}

void HwQueue::wait(const dsa_completion_record &record) const {
    uint64_t since = 0;
    for (uint64_t polls = 1;; ++polls) {
        if (__atomic_load_n(&record.status, __ATOMIC_ACQUIRE) != 0) return;
        // The device cannot wake a futex: "block" naps on the record's
        // line with UMWAIT where the CPU has it, else waits as "yield".
        switch (wait_) {
            case DP_WAIT_SPIN: break;
            case DP_WAIT_PAUSE: cpu_relax(); break;
            case DP_WAIT_BLOCK:
                if (cpu_has_waitpkg()) {
                    nap_on(record);
                    break;
                }
                [[fallthrough]];
            case DP_WAIT_YIELD:
            case DP_WAIT_DEFAULT: sched_yield(); break;
        }
        if (polls % 4096 != 0) continue;
        const uint64_t now = timing::now_ns();
        if (since == 0) since = now;
        else if (now - since >= kSlowDeviceNs) {
            DP_LOG_WARN("mover: {} has not completed a descriptor for {} s; still waiting",
                        description(), (now - since) / 1'000'000'000);
            since = now;
        }
    }
}

void HwQueue::build(const dp_desc_t &d, const Buffers &b, kernels::Store store, uint64_t done,
                    uint64_t chunk, uint32_t crc, dsa_completion_record *record,
                    dsa_hw_desc *out) const {
    dsa_hw_desc &h = *out;
    std::memset(&h, 0, sizeof(h));
    h.opcode = dsa_opcode(d.opcode);
    h.flags = kRecordFlags;
    if (store == kernels::Store::cached) h.flags |= IDXD_OP_FLAG_CC;
    if (queue_.block_on_fault) h.flags |= IDXD_OP_FLAG_BOF;
    h.completion_addr = address(record);
    h.xfer_size = uint32_t(chunk);
    const uint64_t src = address(b.src) + done, dst = address(b.dst) + done;
    switch (d.opcode) {
        case DP_OP_MEMMOVE: h.src_addr = src; h.dst_addr = dst; break;
        case DP_OP_FILL:
            // Resumed `done` bytes in, the pattern starts at its byte
            // done % 8 (little-endian: rotate right).
            h.pattern = std::rotr(d.src2, int(done % 8) * 8);
            h.dst_addr = dst;
            break;
        case DP_OP_COMPARE:
            h.src_addr = src;
            h.src2_addr = address(b.src2) + done;
            h.flags |= IDXD_OP_FLAG_CR;  // a difference: "success, false predicate"
            h.expected_res = 0;
            break;
        case DP_OP_COMPARE_PATTERN:
            h.src_addr = src;
            h.comp_pattern = std::rotr(d.src2, int(done % 8) * 8);
            h.flags |= IDXD_OP_FLAG_CR;
            h.expected_res = 0;
            break;
        case DP_OP_CREATE_DELTA:
            h.src_addr = address(b.src);
            h.src2_addr = address(b.src2);
            h.delta_addr = address(b.dst);
            h.max_delta_size = uint32_t(d.aux);
            h.flags |= IDXD_OP_FLAG_CR;
            h.expected_res_mask = 1u << kDeltaNone;
            break;
        case DP_OP_APPLY_DELTA:
            h.src_addr = address(b.src);
            h.dst_addr = address(b.dst);
            h.delta_rec_size = uint32_t(d.aux);
            break;
        case DP_OP_DUALCAST:
            h.src_addr = src;
            h.dst_addr = dst;
            h.dest2 = address(b.dst2) + done;
            break;
        case DP_OP_CRC32C: h.src_addr = src; h.crc_seed = crc; break;
        case DP_OP_COPY_CRC32C: h.src_addr = src; h.dst_addr = dst; h.crc_seed = crc; break;
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE:
            // The four share one layout (dsa_abi.h): source DIF flags,
            // destination DIF flags, DIF flags, source tags, destination
            // tags. What an opcode does not use is 0 in a checked descriptor
            // (CHECK's dst too), as the device wants it.
            h.src_addr = src;
            h.dst_addr = dst;
            h.src_upd_flags = d.dtype;
            h.upd_dest_flags = d.redop;
            h.dif_upd_flags = d.op_flags;
            put_tags(&h, kDifSourceTags, d.src2);
            put_tags(&h, kDifDestinationTags, d.aux);
            break;
        case DP_OP_CACHE_FLUSH: h.dst_addr = dst; break;
    }
}

bool HwQueue::read(const dp_desc_t &d, const dsa_completion_record &record, uint64_t done,
                   uint32_t *crc, OpResult *r) const {
    switch (d.opcode) {
        case DP_OP_COMPARE:
        case DP_OP_COMPARE_PATTERN:
            if (record.result != 0) {  // bytes_completed: the first difference's offset
                r->status = DP_COMP_FALSE_PREDICATE;
                r->result = 1;
                r->value = done + record.bytes_completed;
                return true;
            }
            return false;
        case DP_OP_CREATE_DELTA:
            if (record.result == kDeltaOverflow) {
                *r = OpResult{};
                r->status = DP_COMP_DELTA_OVERFLOW;
                return true;
            }
            r->value = record.delta_rec_size;
            r->result = record.result != kDeltaNone;
            if (r->result) r->status = DP_COMP_FALSE_PREDICATE;
            return false;
        case DP_OP_APPLY_DELTA: r->value = d.aux; return false;
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: {
            // Every block passed: the next tags follow from the descriptor
            // alone (the record's tag fields are not needed).
            const DifShape shape = checked_dif_shape(d);
            r->value = kernels::dif_next_tags(dif_job(d, shape), shape.blocks);
            return false;
        }
        case DP_OP_CRC32C:
        case DP_OP_COPY_CRC32C:
            *crc = uint32_t(record.crc_val);
            r->value = *crc;
            return false;
    }
    return false;
}

void HwQueue::fault_in(const dsa_completion_record &record) {
    counters_.faults.fetch_add(1, std::memory_order_relaxed);
    touch(record.fault_addr, fault_on_write(record.status));
}

void HwQueue::log_fallback(const dp_desc_t &d, uint8_t status) {
    counters_.fallbacks.fetch_add(1, std::memory_order_relaxed);
    DP_LOG_LIMITED(fallback_log_,
                   "mover: {} failed a {} of {} bytes with DSA status {:#x}: run on the CPU",
                   description(), mover::opcode_name(d.opcode), d.size, status);
}

bool HwQueue::run(const dp_desc_t &d, const Buffers &b, kernels::Store store, OpResult *out) {
    dsa_completion_record &record = t_record.record;
    const uint64_t n = d.size;
    const uint64_t most =
        restarts_after_fault(d.opcode) ? n : std::max<uint64_t>(queue_.max_transfer_size, 1);
    uint64_t done = 0;
    uint32_t crc = uint32_t(d.src2);
    OpResult r;
    r.bytes = n;
    while (done < n) {
        const uint64_t chunk = std::min(n - done, most);
        dsa_hw_desc h;
        build(d, b, store, done, chunk, crc, &record, &h);
        std::memset(&record, 0, sizeof(record));
        submit(h);
        wait(record);
        const uint8_t code = status_code(record.status);
        if (code == DSA_COMP_PAGE_FAULT_NOBOF) {
            // The device did bytes_completed bytes and met a page it could
            // not translate: make it present and go on from there (the
            // delta operations start again).
            fault_in(record);
            if (!restarts_after_fault(d.opcode)) {
                done += std::min<uint64_t>(record.bytes_completed, chunk);
                if (d.opcode == DP_OP_CRC32C || d.opcode == DP_OP_COPY_CRC32C)
                    crc = uint32_t(record.crc_val);
            }
            continue;
        }
        // A tuple failed its check: the CPU runs the descriptor again to
        // find the block and say what failed in mover.h's terms (the error
        // path is rare; the device's dif_status encoding is not relied on).
        if (code == DSA_COMP_DIF_ERR && is_dif(d.opcode)) return false;
        if (code != DSA_COMP_SUCCESS && code != DSA_COMP_SUCCESS_PRED) {
            log_fallback(d, record.status);
            return false;
        }
        if (read(d, record, done, &crc, &r)) break;
        done += chunk;
    }
    *out = r;
    return true;
}

bool HwQueue::batchable(const dp_desc_t &d, const Buffers &b) const {
    return offloads(d, b) && d.size <= queue_.max_transfer_size;
}

void HwQueue::run_batch(const BatchMember *members, size_t count, OpResult *results,
                        MemberOutcome *outcomes) {
    thread_local std::vector<DescLine> descs;
    thread_local std::vector<RecordLine> records;
    descs.resize(count);
    records.resize(count);
    for (size_t k = 0; k < count; ++k) {
        const BatchMember &m = members[k];
        std::memset(&records[k].record, 0, sizeof(records[k].record));
        build(*m.desc, m.buffers, m.store, 0, m.desc->size, uint32_t(m.desc->src2),
              &records[k].record, &descs[k].desc);
        // The device's fence is the mover's: wait for the earlier members,
        // and after a failure abandon this one and the rest.
        if (m.desc->flags & DP_FLAG_FENCE) descs[k].desc.flags |= IDXD_OP_FLAG_FENCE;
    }
    dsa_completion_record &batch_record = t_record.record;
    dsa_hw_desc batch;
    std::memset(&batch, 0, sizeof(batch));
    batch.opcode = DSA_OPCODE_BATCH;
    batch.flags = kRecordFlags;
    batch.completion_addr = address(&batch_record);
    batch.desc_list_addr = address(descs.data());
    batch.desc_count = uint32_t(count);
    std::memset(&batch_record, 0, sizeof(batch_record));
    submit(batch);
    wait(batch_record);
    const uint8_t batch_code = status_code(batch_record.status);
    const bool listed = batch_code == DSA_COMP_SUCCESS || batch_code == DSA_COMP_BATCH_FAIL;
    if (!listed) log_fallback(*members[0].desc, batch_record.status);
    for (size_t k = 0; k < count; ++k) {
        const dsa_completion_record &record = records[k].record;
        const uint8_t code = status_code(record.status);
        if (!listed) {
            // The device refused the batch itself: every member alone.
            outcomes[k] = MemberOutcome::again;
        } else if (record.status == 0) {
            outcomes[k] = MemberOutcome::abandoned;
        } else if (code == DSA_COMP_SUCCESS || code == DSA_COMP_SUCCESS_PRED) {
            OpResult r;
            r.bytes = members[k].desc->size;
            uint32_t crc = 0;
            read(*members[k].desc, record, 0, &crc, &r);
            results[k] = r;
            outcomes[k] = MemberOutcome::done;
        } else {
            if (code == DSA_COMP_PAGE_FAULT_NOBOF) fault_in(record);
            else if (!(code == DSA_COMP_DIF_ERR && is_dif(members[k].desc->opcode)))
                log_fallback(*members[k].desc, record.status);  // (a DIF error: as in run())
            outcomes[k] = MemberOutcome::again;
        }
    }
}

}  // namespace deputy::mover::idxd
