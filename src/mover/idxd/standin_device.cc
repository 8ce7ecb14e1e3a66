#include "mover/idxd/standin_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/cpu_relax.h"
#include "common/futex.h"
#include "mover/dif.h"
#include "mover/queue_group.h"
#include "mover/kernels.h"

namespace deputy::mover::idxd {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kKnownFlags = IDXD_OP_FLAG_FENCE | IDXD_OP_FLAG_BOF | IDXD_OP_FLAG_CRAV |
                                 IDXD_OP_FLAG_RCR | IDXD_OP_FLAG_CR | IDXD_OP_FLAG_CC;
// The idle device looks at its page this many times before sleeping.
constexpr int kIdlePolls = 2000;

// What one pass over an operation's buffers met: the offset of the first
// byte it could not reach (n when it reached all), and that byte's address.
struct Reach {
    uint64_t offset;
    uint64_t address = 0;
    bool write = false;
};

struct Range {
    uint64_t address, bytes;
    bool write;
};

void publish(dsa_completion_record *record, uint8_t status, uint8_t result, uint64_t bytes,
             uint64_t fault_address, uint64_t op_specific) {
    if (record == nullptr) return;
    record->result = result;
    record->bytes_completed = uint32_t(bytes);
    record->fault_addr = fault_address;
    record->crc_val = op_specific;  // (the delta record size shares these bytes)
    __atomic_store_n(&record->status, status, __ATOMIC_RELEASE);
}

kernels::Store store_of(const dsa_hw_desc &d) {
    return (d.flags & IDXD_OP_FLAG_CC) ? kernels::Store::cached : kernels::Store::nontemporal;
}

bool overlapping(uint64_t a, uint64_t b, uint64_t n) { return a < b + n && b < a + n; }

}  // namespace

StandInDevice::StandInDevice(const Options &options) : options_(options) {
    if (options_.queue_size == 0 || options_.queue_size > kSlots) options_.queue_size = kSlots;
    page_ = new Page;
    if (!options_.inline_execution) thread_ = std::thread([this] { run(); });
}

StandInDevice::~StandInDevice() {
    stopping_.store(true, std::memory_order_release);
    futex_wake(reinterpret_cast<uint32_t *>(&page_->tail), 1);
    if (thread_.joinable()) thread_.join();
    delete page_;
}

bool StandInDevice::write(const dsa_hw_desc &desc, bool shared) {
    if (options_.inline_execution) {
        uint32_t left = refuse_.load(std::memory_order_relaxed);
        while (shared && left != 0 && !refuse_.compare_exchange_weak(left, left - 1)) {
        }
        if (shared && left != 0) {
            std::lock_guard lock(mutex_);
            ++counters_.refused;
            return false;
        }
        dsa_hw_desc copy;
        std::memcpy(&copy, &desc, sizeof(copy));  // what the portal write carries
        execute(copy);
        return true;
    }
    for (;;) {
        if (shared) {
            uint32_t left = refuse_.load(std::memory_order_relaxed);
            while (left != 0 && !refuse_.compare_exchange_weak(left, left - 1)) {
            }
            if (left != 0) {
                std::lock_guard lock(mutex_);
                ++counters_.refused;
                return false;
            }
        }
        while (writing_.test_and_set(std::memory_order_acquire)) cpu_relax();
        const uint32_t tail = page_->tail.load(std::memory_order_relaxed);
        if (tail - page_->head.load(std::memory_order_acquire) < options_.queue_size) {
            std::memcpy(&page_->slot[tail % kSlots], &desc, sizeof(desc));
            page_->tail.store(tail + 1, std::memory_order_release);
            writing_.clear(std::memory_order_release);
            // Pairs with the device's fence before it sleeps.
            doorbell_fence();
            if (page_->sleeping.load(std::memory_order_relaxed))
                futex_wake(reinterpret_cast<uint32_t *>(&page_->tail), 1);
            return true;
        }
        writing_.clear(std::memory_order_release);
        if (shared) {
            std::lock_guard lock(mutex_);
            ++counters_.refused;
            return false;
        }
        cpu_relax();
    }
}

void StandInDevice::mark_not_present(const void *address) {
    std::lock_guard lock(mutex_);
    not_present_.insert(reinterpret_cast<uint64_t>(address) & ~(kPage - 1));
}

StandInDevice::Counters StandInDevice::counters() const {
    std::lock_guard lock(mutex_);
    return counters_;
}

void StandInDevice::make_present(uint64_t address) {
    std::lock_guard lock(mutex_);
    not_present_.erase(address & ~(kPage - 1));
}

uint64_t StandInDevice::first_fault(uint64_t p, uint64_t n) {
    std::lock_guard lock(mutex_);
    if (n == 0 || not_present_.empty()) return n;
    auto it = not_present_.lower_bound(p & ~(kPage - 1));
    if (it == not_present_.end() || *it >= p + n) return n;
    return *it <= p ? 0 : *it - p;
}

void StandInDevice::run() {
    int idle = 0;
    for (;;) {
        const uint32_t head = page_->head.load(std::memory_order_relaxed);
        const uint32_t tail = page_->tail.load(std::memory_order_acquire);
        if (head != tail) {
            dsa_hw_desc desc;
            std::memcpy(&desc, &page_->slot[head % kSlots], sizeof(desc));
            page_->head.store(head + 1, std::memory_order_release);
            execute(desc);
            idle = 0;
            continue;
        }
        if (stopping_.load(std::memory_order_acquire)) return;
        if (++idle < kIdlePolls) {
            cpu_relax();
            continue;
        }
        page_->sleeping.store(1, std::memory_order_relaxed);
        doorbell_fence();
        if (page_->tail.load(std::memory_order_acquire) == tail &&
            !stopping_.load(std::memory_order_acquire))
            futex_wait(reinterpret_cast<uint32_t *>(&page_->tail), tail, 100'000'000);
        page_->sleeping.store(0, std::memory_order_relaxed);
        idle = 0;
    }
}

void StandInDevice::execute(const dsa_hw_desc &desc) {
    auto *record = (desc.flags & IDXD_OP_FLAG_CRAV)
                       ? reinterpret_cast<dsa_completion_record *>(desc.completion_addr)
                       : nullptr;
    if (desc.opcode == DSA_OPCODE_BATCH) execute_batch(desc, record);
    else execute_one(desc, record);
}

uint8_t StandInDevice::execute_batch(const dsa_hw_desc &d, dsa_completion_record *record) {
    if (d.flags & ~uint32_t(IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR)) {
        publish(record, DSA_COMP_INVALID_FLAGS, 0, 0, 0, 0);
        return DSA_COMP_INVALID_FLAGS;
    }
    if (d.desc_count < 2 || d.desc_count > options_.max_batch_size ||
        d.desc_list_addr % kDescListAlign != 0) {
        const uint8_t s = d.desc_count < 2 || d.desc_count > options_.max_batch_size
                              ? DSA_COMP_DESC_CNT_ERANGE
                              : DSA_COMP_DESCLIST_ALIGN;
        publish(record, s, 0, 0, 0, 0);
        return s;
    }
    const auto *list = reinterpret_cast<const dsa_hw_desc *>(d.desc_list_addr);
    uint32_t completed = 0;
    bool failed = false;
    for (uint32_t i = 0; i < d.desc_count; ++i) {
        dsa_hw_desc member;
        std::memcpy(&member, &list[i], sizeof(member));
        // A fenced member after a failure and all that follow are
        // abandoned: no completion record, not counted as completed.
        if ((member.flags & IDXD_OP_FLAG_FENCE) && failed) break;
        auto *member_record = (member.flags & IDXD_OP_FLAG_CRAV)
                                  ? reinterpret_cast<dsa_completion_record *>(member.completion_addr)
                                  : nullptr;
        uint8_t s;
        if (member.opcode == DSA_OPCODE_BATCH || member.opcode == DSA_OPCODE_DRAIN) {
            s = DSA_COMP_BAD_OPCODE;
            publish(member_record, s, 0, 0, 0, 0);
        } else {
            s = execute_one(member, member_record);
        }
        ++completed;
        if (s != DSA_COMP_SUCCESS && s != DSA_COMP_SUCCESS_PRED) failed = true;
    }
    const uint8_t s = failed ? DSA_COMP_BATCH_FAIL : DSA_COMP_SUCCESS;
    publish(record, s, 0, completed, 0, 0);
    return s;
}

uint8_t StandInDevice::execute_one(const dsa_hw_desc &d, dsa_completion_record *record) {
    {
        std::lock_guard lock(mutex_);
        ++counters_.executed;
    }
    auto done = [&](uint8_t status, uint8_t result = 0, uint64_t bytes = 0, uint64_t fault = 0,
                    uint64_t specific = 0) {
        publish(record, status, result, bytes, fault, specific);
        return status_code(status);
    };
    if (d.flags & ~kKnownFlags) return done(DSA_COMP_INVALID_FLAGS);
    const bool block = d.flags & IDXD_OP_FLAG_BOF;
    if (block && !options_.block_on_fault) return done(DSA_COMP_INVALID_FLAGS);
    const uint8_t op = d.opcode;
    if (op == DSA_OPCODE_NOOP || op == DSA_OPCODE_DRAIN) return done(DSA_COMP_SUCCESS);
    const uint64_t n = d.xfer_size;
    if (n == 0 || n > options_.max_transfer_size) return done(DSA_COMP_XFER_ERANGE);

    // How far the operation gets before a not-present page: with block on
    // fault the device waits for each page and gets everywhere. Offsets
    // run to `end`: n, or the longest range where one is longer (DIF insert).
    auto reach = [&](std::initializer_list<Range> ranges, uint64_t end = 0) {
        Reach r{end ? end : n};
        for (const Range &range : ranges) {
            for (;;) {
                uint64_t at = first_fault(range.address, range.bytes);
                if (at == range.bytes) break;
                if (block) {
                    make_present(range.address + at);
                    std::lock_guard lock(mutex_);
                    ++counters_.blocked;
                    continue;
                }
                if (at < r.offset) r = {at, range.address + at, range.write};
                break;
            }
        }
        return r;
    };
    auto fault = [&](const Reach &r, uint64_t specific = 0) {
        make_present(r.address);  // the submitter touches it before resubmitting
        {
            std::lock_guard lock(mutex_);
            ++counters_.faults;
        }
        return done(uint8_t(DSA_COMP_PAGE_FAULT_NOBOF | (r.write ? DSA_COMP_STATUS_WRITE : 0)), 0,
                    r.offset, r.address, specific);
    };
    auto *src = reinterpret_cast<const void *>(d.src_addr);
    auto *dst = reinterpret_cast<void *>(d.dst_addr);
    const bool check = d.flags & IDXD_OP_FLAG_CR;

    switch (op) {
        case DSA_OPCODE_MEMMOVE: {
            if (overlapping(d.src_addr, d.dst_addr, n)) {
                // (Overlapping moves are not made to fault here.)
                kernels::move(dst, src, n, store_of(d));
                return done(DSA_COMP_SUCCESS, 0, n);
            }
            Reach r = reach({{d.src_addr, n, false}, {d.dst_addr, n, true}});
            kernels::move(dst, src, r.offset, store_of(d));
            return r.offset < n ? fault(r) : done(DSA_COMP_SUCCESS, 0, n);
        }
        case DSA_OPCODE_MEMFILL: {
            Reach r = reach({{d.dst_addr, n, true}});
            kernels::fill(dst, d.pattern, r.offset, store_of(d));
            return r.offset < n ? fault(r) : done(DSA_COMP_SUCCESS, 0, n);
        }
        case DSA_OPCODE_COMPARE:
        case DSA_OPCODE_COMPVAL: {
            const bool pattern = op == DSA_OPCODE_COMPVAL;
            Reach r = pattern ? reach({{d.src_addr, n, false}})
                              : reach({{d.src_addr, n, false}, {d.src2_addr, n, false}});
            const uint64_t at =
                pattern ? kernels::compare_pattern(src, d.comp_pattern, r.offset)
                        : kernels::compare(src, reinterpret_cast<const void *>(d.src2_addr), r.offset);
            if (at < r.offset) {  // a difference: bytes completed = its offset
                const bool unexpected = check && d.expected_res != 1;
                return done(unexpected ? DSA_COMP_SUCCESS_PRED : DSA_COMP_SUCCESS, 1, at);
            }
            if (r.offset < n) return fault(r);
            return done(check && d.expected_res != 0 ? DSA_COMP_SUCCESS_PRED : DSA_COMP_SUCCESS, 0, n);
        }
        case DSA_OPCODE_CR_DELTA: {
            if (n % 8 != 0 || n > DP_DELTA_MAX_SIZE) return done(DSA_COMP_XFER_ERANGE);
            if (d.max_delta_size == 0 || d.max_delta_size % DP_DELTA_ENTRY_SIZE != 0)
                return done(DSA_COMP_DR_ERANGE);
            Reach r = reach({{d.src_addr, n, false},
                             {d.src2_addr, n, false},
                             {d.delta_addr, d.max_delta_size, true}});
            if (r.offset < n) return fault({0, r.address, r.write});
            size_t size = kernels::create_delta(src, reinterpret_cast<const void *>(d.src2_addr), n,
                                                reinterpret_cast<void *>(d.delta_addr),
                                                d.max_delta_size);
            const uint8_t result = size == SIZE_MAX ? kDeltaOverflow
                                   : size != 0      ? kDeltaSome
                                                    : kDeltaNone;
            const bool expected = (d.expected_res_mask >> result) & 1;
            return done(check && !expected ? DSA_COMP_SUCCESS_PRED : DSA_COMP_SUCCESS, result,
                        result == kDeltaOverflow ? 0 : n, 0, size == SIZE_MAX ? 0 : size);
        }
        case DSA_OPCODE_AP_DELTA: {
            if (n % 8 != 0 || n > DP_DELTA_MAX_SIZE) return done(DSA_COMP_XFER_ERANGE);
            Reach r = reach({{d.src_addr, d.delta_rec_size, false}, {d.dst_addr, n, true}});
            if (r.offset < n) return fault({0, r.address, r.write});
            if (!kernels::apply_delta(dst, n, src, d.delta_rec_size))
                return done(DSA_COMP_DR_OFFSET_ERANGE);
            return done(DSA_COMP_SUCCESS, 0, n);
        }
        case DSA_OPCODE_DUALCAST: {
            if ((d.dst_addr ^ d.dest2) & 0xfff) return done(DSA_COMP_DCAST_ERR);
            Reach r = reach({{d.src_addr, n, false}, {d.dst_addr, n, true}, {d.dest2, n, true}});
            kernels::dualcast(dst, reinterpret_cast<void *>(d.dest2), src, r.offset, store_of(d));
            return r.offset < n ? fault(r) : done(DSA_COMP_SUCCESS, 0, n);
        }
        case DSA_OPCODE_CRCGEN:
        case DSA_OPCODE_COPY_CRC: {
            const bool copy = op == DSA_OPCODE_COPY_CRC;
            Reach r = copy ? reach({{d.src_addr, n, false}, {d.dst_addr, n, true}})
                           : reach({{d.src_addr, n, false}});
            const uint32_t crc = copy ? kernels::copy_crc32c(dst, src, r.offset, d.crc_seed, store_of(d))
                                      : kernels::crc32c(d.crc_seed, src, r.offset);
            return r.offset < n ? fault(r, crc) : done(DSA_COMP_SUCCESS, 0, n, 0, crc);
        }
        case DSA_OPCODE_DIF_CHECK:
        case DSA_OPCODE_DIF_INS:
        case DSA_OPCODE_DIF_STRP:
        case DSA_OPCODE_DIF_UPDT: {
            // The mover's descriptor the device's fields stand for (same
            // opcode numbers), so the shape and the kernel are the mover's.
            dp_desc_t m{};
            m.opcode = op;
            m.size = n;
            if (op == DSA_OPCODE_DIF_INS) {
                m.redop = d.dest_dif_flag;
                m.op_flags = d.dif_ins_flags;
                m.aux = DP_DIF_TAGS(d.ins_ref_tag_seed, d.ins_app_tag_mask, d.ins_app_tag_seed);
            } else if (op == DSA_OPCODE_DIF_UPDT) {
                m.dtype = d.src_upd_flags;
                m.redop = d.upd_dest_flags;
                m.op_flags = d.dif_upd_flags;
                m.src2 = DP_DIF_TAGS(d.src_ref_tag_seed, d.src_app_tag_mask, d.src_app_tag_seed);
                m.aux = DP_DIF_TAGS(d.dest_ref_tag_seed, d.dest_app_tag_mask, d.dest_app_tag_seed);
            } else {
                m.dtype = d.src_dif_flags;
                m.op_flags = d.dif_chk_flags;
                m.src2 = DP_DIF_TAGS(d.chk_ref_tag_seed, d.chk_app_tag_mask, d.chk_app_tag_seed);
            }
            DifShape shape;
            if (uint8_t s = dif_shape(m, &shape); s != DP_COMP_SUCCESS)
                return done(s == DP_COMP_INVALID_SIZE ? DSA_COMP_XFER_ERANGE : DSA_COMP_INVALID_FLAGS);
            const bool writes = op != DSA_OPCODE_DIF_CHECK;
            const uint64_t end = std::max(n, shape.dst_bytes);
            Reach r = writes ? reach({{d.src_addr, n, false}, {d.dst_addr, shape.dst_bytes, true}}, end)
                             : reach({{d.src_addr, n, false}});
            if (r.offset < end) return fault({0, r.address, r.write});  // restarted whole
            const kernels::DifOutcome out =
                kernels::dif(dif_job(m, shape), src, writes ? dst : nullptr, shape.blocks);
            if (out.error != 0)
                return done(DSA_COMP_DIF_ERR, uint8_t(out.error), out.blocks * (n / shape.blocks));
            return done(DSA_COMP_SUCCESS, 0, n, 0, out.next_tags);
        }
        case DSA_OPCODE_CFLUSH: {
            Reach r = reach({{d.dst_addr, n, true}});
            kernels::cache_flush(dst, r.offset, (d.flags & IDXD_OP_FLAG_CC) != 0);
            return r.offset < n ? fault(r) : done(DSA_COMP_SUCCESS, 0, n);
        }
        default:
            return done(DSA_COMP_BAD_OPCODE);
    }
}

}  // namespace deputy::mover::idxd
