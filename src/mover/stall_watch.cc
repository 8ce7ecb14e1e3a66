#include "mover/stall_watch.h"

#include "common/timing.h"

namespace deputy::mover {
namespace {

thread_local const StallWatch *t_watch = nullptr;
thread_local EngineSlot *t_slot = nullptr;

}  // namespace

EngineSlot *StallWatch::take() {
    for (uint32_t i = 0; i < capacity_; ++i) {
        EngineSlot &s = slots_[i];
        if (s.used) continue;
        s.used = true;
        s.owner.store(0, std::memory_order_relaxed);
        s.since_ns.store(0, std::memory_order_relaxed);
        s.held.store(false, std::memory_order_relaxed);
        s.exited.store(false, std::memory_order_relaxed);
        if (i + 1 > high_water_.load(std::memory_order_relaxed))
            high_water_.store(i + 1, std::memory_order_release);
        return &s;
    }
    return nullptr;
}

void StallWatch::give_back(EngineSlot *slot) {
    if (slot->held.load(std::memory_order_relaxed))
        held_.fetch_sub(1, std::memory_order_relaxed);
    slot->held.store(false, std::memory_order_relaxed);
    slot->used = false;
}

uint32_t StallWatch::mark_held(uint64_t now_ns, uint32_t *held) {
    const uint64_t limit = limit_ns();
    uint32_t marked = 0;
    const uint32_t n = high_water_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; limit != 0 && i < n; ++i) {
        EngineSlot &s = slots_[i];
        if (!s.used || s.held.load(std::memory_order_relaxed)) continue;
        if (s.owner.load(std::memory_order_acquire) == 0) continue;
        const uint64_t since = s.since_ns.load(std::memory_order_relaxed);
        if (since == 0 || now_ns < since || now_ns - since <= limit) continue;
        // Counted before it is marked: a call that sees the mark sees the count.
        held_.fetch_add(1, std::memory_order_relaxed);
        s.held.store(true, std::memory_order_release);
        ++marked;
    }
    *held = held_.load(std::memory_order_relaxed);
    return marked;
}

bool StallWatch::may_enter(uint64_t owner, uint64_t now_ns, uint64_t *held_ns) const {
    if (held_.load(std::memory_order_acquire) == 0) return true;
    const uint32_t n = high_water_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < n; ++i) {
        const EngineSlot &s = slots_[i];
        if (!s.held.load(std::memory_order_acquire)) continue;
        if (s.owner.load(std::memory_order_acquire) != owner) continue;
        const uint64_t since = s.since_ns.load(std::memory_order_relaxed);
        *held_ns = now_ns > since ? now_ns - since : 0;
        return false;
    }
    return true;
}

void StallWatch::bind_current_thread(const StallWatch *watch, EngineSlot *slot) {
    t_watch = watch;
    t_slot = slot;
}

const StallWatch *StallWatch::current_watch() { return t_watch; }
EngineSlot *StallWatch::current_slot() { return t_slot; }

SubmitterCall::SubmitterCall(uint64_t owner) {
    EngineSlot *slot = t_slot;
    if (slot == nullptr || t_watch == nullptr || t_watch->limit_ns() == 0 || owner == 0) return;
    const uint64_t now = timing::now_ns();
    if (!t_watch->may_enter(owner, now, &held_ns_)) {
        admitted_ = false;
        return;
    }
    slot->since_ns.store(now, std::memory_order_relaxed);
    slot->owner.store(owner, std::memory_order_release);
    slot_ = slot;
}

SubmitterCall::~SubmitterCall() {
    if (slot_) slot_->owner.store(0, std::memory_order_release);
}

}  // namespace deputy::mover
