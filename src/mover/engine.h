// An engine: one worker thread serving one group's queues, like a DSA
// processing engine. It takes descriptors by weighted round-robin over the
// group's queues (a queue's priority = descriptors per turn), executes them,
// writes completion records, polls for idle_spin_us when out of work and then
// sleeps on the group's doorbell.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "mover/address_space.h"
#include "mover/queue_group.h"
#include "mover/space_table.h"
#include "mover/stall_watch.h"

namespace deputy::mover {

// Per-engine counters, written only by the engine (no shared cache line).
struct alignas(64) EngineCounters {
    std::atomic<uint64_t> completed{0};
    std::atomic<uint64_t> failed{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> lost_completions{0};  // record address refused
    std::atomic<uint64_t> dropped{0};           // descriptors of a retired address space
    // Time from finding work after an idle spell to the next look that
    // finds none: the engine's working time, read per burst rather than per
    // descriptor (a clock read is a tenth of a small descriptor's cost). A
    // burst's start is the idle loop's last clock read, at most
    // kIdleClockPolls polls early.
    std::atomic<uint64_t> busy_ns{0};
};

class Engine {
public:
    // `slot`: its place in the device's StallWatch (which says when it is held).
    // yield_after_ns: DeviceConfig's.
    Engine(GroupState *group, const SpaceTable *spaces, int cpu, uint64_t idle_spin_ns,
           bool idle_yield, uint64_t yield_after_ns, const StallWatch *watch, EngineSlot *slot);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    void start();
    // Asks the thread to finish what is queued and exit; joins it.
    void stop();
    const EngineCounters &counters() const { return counters_; }
    // The CPU it was told to run on (-1: unpinned), and its thread's id
    // once the thread runs (0 before): `deputy info` reads the scheduler's
    // numbers for it.
    int cpu() const { return cpu_; }
    pid_t tid() const { return tid_.load(std::memory_order_acquire); }
    GroupState *group() const { return group_; }
    EngineSlot *slot() const { return slot_; }
    // Held in a submitter's call and replaced (the device's owner's flag).
    bool relieved = false;

private:
    void run();
    bool serve_once();
    // Runs one descriptor.
    void process(WqState *wq, const dp_desc_t &desc, uint32_t pasid);
    void drain(WqState *wq);
    void sleep();

    GroupState *group_;
    const SpaceTable *spaces_;
    int cpu_;
    uint64_t idle_spin_ns_;
    bool idle_yield_;
    uint64_t yield_after_ns_;
    uint64_t worked_since_ = 0;  // this burst's start, or the last yield in it
    const StallWatch *watch_;
    EngineSlot *slot_;
    std::atomic<bool> stopping_{false};
    std::atomic<pid_t> tid_{0};
    std::thread thread_;
    EngineCounters counters_;
};

}  // namespace deputy::mover
