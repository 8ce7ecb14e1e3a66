// Engines held by a submitter. Behind the agent an engine reaches a
// client's ordinary memory through the client's process (process_vm_readv),
// and the client decides how long that takes: memory armed with
// userfaultfd (or on a stalled FUSE file) holds the call, and the engine
// with it, for as long as the client likes. With one or two engines, two
// such descriptors would stop every other client's work.
//
// So each engine says when it enters and leaves a call that may wait on a
// submitter (SubmitterCall, naming the submitter by an owner key: the
// agent's is the client's pid). The device's owner looks now and then
// (Device::relieve_held_engines): an engine inside one call for longer than
// the limit is *held*; a relief engine takes its place in its group, and
// the held one leaves once its call returns. While one of its calls holds
// an engine, the same submitter's new calls are refused at once (the
// caller fails that work), so one submitter holds at most the engines that
// entered its memory within one limit: never the relief engines.
//
// The table is fixed at creation (the configured engines plus kMaxReliefs)
// so engines can read every slot while the owner adds engines.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace deputy::mover {

struct alignas(64) EngineSlot {
    std::atomic<uint64_t> owner{0};      // the submitter inside a call (0: none)
    std::atomic<uint64_t> since_ns{0};   // when that call began
    std::atomic<bool> held{false};       // relieved: leaves after its descriptor
    std::atomic<bool> exited{false};     // its thread returned (the owner joins it)
    bool used = false;                   // (the owner's)
};

class StallWatch {
  public:
    static constexpr uint32_t kMaxReliefs = 64;

    explicit StallWatch(uint32_t engines)
        : capacity_(engines + kMaxReliefs), slots_(new EngineSlot[capacity_]) {}

    // --- the owner ---
    // A free slot for a new engine (nullptr: every relief is in use).
    EngineSlot *take();
    void give_back(EngineSlot *slot);
    // 0: nothing is watched (in-process devices). Set before any relief.
    void set_limit_ns(uint64_t ns) { limit_ns_.store(ns, std::memory_order_relaxed); }
    uint64_t limit_ns() const { return limit_ns_.load(std::memory_order_relaxed); }
    // Marks every engine inside one call for longer than the limit as held
    // and returns how many it newly marked. `held` counts all of them.
    uint32_t mark_held(uint64_t now_ns, uint32_t *held);

    // --- engines (any thread; a no-op on threads that are not engines) ---
    // Whether a call on `owner` may begin: false while a held engine is
    // still inside one of `owner`'s calls (*held_ns: for how long).
    bool may_enter(uint64_t owner, uint64_t now_ns, uint64_t *held_ns) const;
    static void bind_current_thread(const StallWatch *watch, EngineSlot *slot);
    static const StallWatch *current_watch();
    static EngineSlot *current_slot();

  private:
    uint32_t capacity_;
    std::unique_ptr<EngineSlot[]> slots_;
    std::atomic<uint32_t> high_water_{0};  // slots ever used: engines scan this many
    std::atomic<uint32_t> held_{0};        // engines held now: calls skip the scan at 0
    std::atomic<uint64_t> limit_ns_{0};
};

// Brackets one call an engine makes that its submitter can hold
// (ClientProcess::read/write). On a thread that is not an engine of a
// watched device it does nothing and always admits.
class SubmitterCall {
  public:
    explicit SubmitterCall(uint64_t owner);
    ~SubmitterCall();
    SubmitterCall(const SubmitterCall &) = delete;
    SubmitterCall &operator=(const SubmitterCall &) = delete;
    // False: refused (another call of the owner holds an engine); nothing
    // was entered. held_ns(): how long that call has held it.
    bool admitted() const { return admitted_; }
    uint64_t held_ns() const { return held_ns_; }

  private:
    EngineSlot *slot_ = nullptr;
    bool admitted_ = true;
    uint64_t held_ns_ = 0;
};

}  // namespace deputy::mover
