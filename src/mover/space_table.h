// Address spaces by PASID, shared by the device's owner (who adds and
// retires spaces) and its engines (who look one up for each descriptor).
//
// Behind the agent a space is a client's memory, and a client may leave at
// any moment with descriptors still queued or running. Two rules keep its
// memory from being freed under an engine:
//  - a PASID names a slot *and* a generation (low bits: slot, high bits:
//    generation). Retiring a space bumps the slot's generation, so a
//    descriptor queued before is recognised as stale and dropped, even
//    after the slot serves another client;
//  - an engine announces itself in the slot (`active`) before it reads the
//    space pointer, and leaves after its descriptor finished. The owner
//    clears the pointer first and frees the space only once `active` is 0.
//    Both sides use sequentially consistent operations (a Dekker handshake):
//    either the engine sees the cleared pointer, or the owner sees the
//    engine inside.
// The owner never waits: it asks idle() now and then and releases the slot
// when it is.
#pragma once

#include <deputy/status.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "mover/address_space.h"

namespace deputy::mover {

class SpaceTable {
  public:
    static constexpr uint32_t kSlotBits = 10;
    static constexpr uint32_t kSlots = 1u << kSlotBits;
    static constexpr uint32_t kLocal = 0;  // slot 0, generation 0: the device's own process

    SpaceTable() : slots_(new Slot[kSlots]) {}

    // --- the owner (one thread) ---
    // The local space, in slot 0, forever.
    void set_local(const AddressSpace *space) { slots_[0].space.store(space); }
    // Installs `space`; DP_ERR_NOMEM when every slot is used or retiring.
    dp_status_t add(const AddressSpace *space, uint32_t *pasid) {
        for (uint32_t index = 1; index < kSlots; ++index) {
            Slot &s = slots_[index];
            if (s.used) continue;
            s.used = true;
            s.space.store(space);
            *pasid = index | (s.generation.load(std::memory_order_relaxed) << kSlotBits);
            return DP_OK;
        }
        return DP_ERR_NOMEM;
    }
    // From now on no engine starts a descriptor of `pasid`; queued ones are
    // dropped as stale. The space must stay valid until idle(pasid).
    void retire(uint32_t pasid) {
        Slot *s = owned(pasid);
        if (!s) return;
        s->space.store(nullptr);  // seq_cst: pairs with enter()
        s->generation.store(
            (s->generation.load(std::memory_order_relaxed) + 1) & (UINT32_MAX >> kSlotBits),
            std::memory_order_relaxed);
    }
    // True once no engine is inside a descriptor of a retired `pasid`.
    bool idle(uint32_t pasid) const {
        const Slot *s = owned(pasid);
        return !s || s->active.load() == 0;  // seq_cst: pairs with enter()
    }
    // Makes a retired, idle slot available again.
    void release(uint32_t pasid) {
        if (Slot *s = owned(pasid)) s->used = false;
    }

    // --- engines ---
    // The space of `pasid`, or nullptr when it was retired (or never
    // existed). A non-null result must be followed by leave(pasid).
    const AddressSpace *enter(uint32_t pasid) const {
        Slot &s = slots_[pasid & (kSlots - 1)];
        s.active.fetch_add(1);  // seq_cst: announce before looking
        const AddressSpace *space = s.space.load();
        if (space && s.generation.load(std::memory_order_relaxed) == pasid >> kSlotBits)
            return space;
        s.active.fetch_sub(1, std::memory_order_release);
        return nullptr;
    }
    void leave(uint32_t pasid) const {
        // Release: everything the engine did in the space happens before the
        // owner, seeing 0, frees it.
        slots_[pasid & (kSlots - 1)].active.fetch_sub(1, std::memory_order_release);
    }

  private:
    struct alignas(64) Slot {
        std::atomic<const AddressSpace *> space{nullptr};
        mutable std::atomic<uint32_t> active{0};
        std::atomic<uint32_t> generation{0};
        bool used = false;  // owner only: installed or retiring
    };
    Slot *owned(uint32_t pasid) const {
        const uint32_t index = pasid & (kSlots - 1);
        return index == kLocal ? nullptr : &slots_[index];
    }

    std::unique_ptr<Slot[]> slots_;
};

}  // namespace deputy::mover
