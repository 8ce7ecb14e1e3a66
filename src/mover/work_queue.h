// A work queue: a bounded ring of 64-byte descriptors between submitters and
// engines.
//
// Layout is position-independent (indices and sequence numbers only) so the
// same ring can live in a memfd segment shared with the agent. Each slot has a
// sequence number (Vyukov's bounded MPMC queue, counting in steps of two): a
// slot at position p is free for a producer when seq == 2p and holds a
// descriptor for a consumer when seq == 2p + 1; the consumer frees it for the
// next lap with seq = 2(p + size). Steps of two keep "full at p" and "free at
// p + 1" apart when size == 1 (with steps of one both would be p + 1).
//  - dedicated queue: one producer thread, so submit is a load, a 64-byte copy
//    and a release store (no read-modify-write);
//  - shared queue: producers claim positions with a CAS on tail, lock-free; a
//    full queue answers "retry" like ENQCMD.
// Engines (several per group) always claim with a CAS on head.
#pragma once

#include <deputy/mover.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace deputy::mover {

struct alignas(64) WorkQueueSlot {
    std::atomic<uint64_t> seq;
    uint32_t pasid;  // the submitter's address space
    uint32_t reserved[13];
    dp_desc_t desc;
};
static_assert(sizeof(dp_desc_t) == 64, "a descriptor is 64 bytes");
static_assert(sizeof(dp_completion_t) == 32, "a completion record is 32 bytes");
static_assert(sizeof(WorkQueueSlot) == 128, "slot = sequence line + descriptor line");

struct WorkQueueHeader {
    alignas(64) std::atomic<uint64_t> tail;  // next position a producer claims
    alignas(64) std::atomic<uint64_t> head;  // next position an engine claims
    alignas(64) uint32_t size;               // power of two
    uint32_t mask;
};

class WorkQueue {
public:
    // Bytes of memory a ring of `size` slots needs (64-byte aligned).
    static size_t bytes_for(uint32_t size) {
        return sizeof(WorkQueueHeader) + size_t(size) * sizeof(WorkQueueSlot);
    }
    // Formats `memory` (bytes_for(size), 64-byte aligned) as an empty ring.
    static WorkQueue format(void *memory, uint32_t size);
    // Attaches to a ring another party formatted.
    explicit WorkQueue(void *memory = nullptr)
        : header_(static_cast<WorkQueueHeader *>(memory)),
          slots_(reinterpret_cast<WorkQueueSlot *>(static_cast<char *>(memory) +
                                                   sizeof(WorkQueueHeader))),
          mask_(memory ? header_->mask : 0) {}

    uint32_t size() const { return header_->size; }

    // Single producer. False when full.
    bool push_dedicated(const dp_desc_t &desc, uint32_t pasid) {
        // Only this thread writes tail, so a relaxed load sees its own last store.
        uint64_t pos = header_->tail.load(std::memory_order_relaxed);
        WorkQueueSlot &slot = slots_[pos & mask_];
        // Acquire pairs with the consumer's release in pop(): the slot's old
        // descriptor has been copied out before we overwrite it.
        if (slot.seq.load(std::memory_order_acquire) != 2 * pos) return false;
        fill(slot, desc, pasid, pos);
        header_->tail.store(pos + 1, std::memory_order_relaxed);
        return true;
    }

    // Any number of producers. False when full.
    bool push_shared(const dp_desc_t &desc, uint32_t pasid) {
        uint64_t pos = header_->tail.load(std::memory_order_relaxed);
        for (;;) {
            WorkQueueSlot &slot = slots_[pos & mask_];
            uint64_t seq = slot.seq.load(std::memory_order_acquire);
            int64_t lag = int64_t(seq - 2 * pos);
            if (lag == 0) {
                if (header_->tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed))
                    return fill(slot, desc, pasid, pos), true;
            } else if (lag < 0) {
                return false;  // the slot still holds last lap's descriptor: full
            } else {
                pos = header_->tail.load(std::memory_order_relaxed);
            }
        }
    }

    // Descriptors queued and not yet claimed by an engine (a snapshot).
    // The head first: engines move it on meanwhile, but never past a tail
    // read after it, so the difference cannot wrap.
    uint64_t occupancy() const {
        const uint64_t head = header_->head.load(std::memory_order_acquire);
        return header_->tail.load(std::memory_order_relaxed) - head;
    }

    // True when a descriptor is probably waiting (a hint for engines' idle loop).
    bool maybe_nonempty() const {
        uint64_t pos = header_->head.load(std::memory_order_relaxed);
        return slots_[pos & mask_].seq.load(std::memory_order_acquire) == 2 * pos + 1;
    }

    // Engines. On success copies the descriptor out, frees its slot and
    // returns its position. `before_claim` runs before the claiming CAS and
    // `abort_claim` when that CAS loses (the device counts in-flight work
    // there so a DRAIN can see it; see engine.cc).
    template <typename BeforeClaim, typename AbortClaim>
    bool pop(dp_desc_t *desc, uint32_t *pasid, uint64_t *position, BeforeClaim before_claim,
             AbortClaim abort_claim) {
        uint64_t pos = header_->head.load(std::memory_order_relaxed);
        for (;;) {
            WorkQueueSlot &slot = slots_[pos & mask_];
            // Acquire pairs with the producer's release in fill(): the
            // descriptor bytes are visible once seq says "full".
            uint64_t seq = slot.seq.load(std::memory_order_acquire);
            int64_t lag = int64_t(seq - (2 * pos + 1));
            if (lag < 0) return false;  // empty
            if (lag > 0) {
                pos = header_->head.load(std::memory_order_relaxed);
                continue;
            }
            before_claim();
            // acq_rel: engines that claim later positions synchronize with
            // this claim (and see before_claim's effects).
            if (header_->head.compare_exchange_weak(pos, pos + 1, std::memory_order_acq_rel,
                                                    std::memory_order_relaxed)) {
                std::memcpy(desc, &slot.desc, sizeof(dp_desc_t));
                *pasid = slot.pasid;
                *position = pos;
                // Release: the copy-out above completes before a producer reuses the slot.
                slot.seq.store(2 * (pos + header_->size), std::memory_order_release);
                return true;
            }
            abort_claim();
        }
    }

    // Descriptors submitted so far (for stats).
    uint64_t submitted() const { return header_->tail.load(std::memory_order_relaxed); }

private:
    void fill(WorkQueueSlot &slot, const dp_desc_t &desc, uint32_t pasid, uint64_t pos) {
        std::memcpy(&slot.desc, &desc, sizeof(dp_desc_t));
        slot.pasid = pasid;
        // Release pairs with the engine's acquire in pop().
        slot.seq.store(2 * pos + 1, std::memory_order_release);
    }

    WorkQueueHeader *header_;
    WorkQueueSlot *slots_;
    // A copy of header_->mask, fixed at format time: one line fewer per push.
    uint64_t mask_;
};

}  // namespace deputy::mover
