#include "mover/engine.h"

#include <sched.h>

#include "common/affinity.h"
#include "common/cpu_relax.h"
#include "common/futex.h"
#include "common/log.h"
#include "common/scratch.h"
#include "common/thread_sched.h"
#include "common/timing.h"

namespace deputy::mover {
namespace {

// Counters have one writer (their engine): a plain add, published relaxed.
void bump(std::atomic<uint64_t> &counter, uint64_t by) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// How long an idle engine sleeps before looking again even without a
// doorbell: a safety net only, wake-ups come from the doorbell.
constexpr int64_t kSleepCapNs = 100'000'000;

// An idle engine reads the clock every this many polls (reading it every
// poll would cost more than the poll): it decides when to sleep, and it
// starts the next burst's busy time.
constexpr unsigned kIdleClockPolls = 16;

}  // namespace

void GroupState::wake_all() {
    doorbell.fetch_add(1, std::memory_order_release);
    futex_wake(reinterpret_cast<uint32_t *>(&doorbell), INT32_MAX);
}

Engine::Engine(GroupState *group, const SpaceTable *spaces, int cpu, uint64_t idle_spin_ns,
               bool idle_yield, uint64_t yield_after_ns, const StallWatch *watch,
               EngineSlot *slot)
    : group_(group), spaces_(spaces), cpu_(cpu), idle_spin_ns_(idle_spin_ns),
      idle_yield_(idle_yield), yield_after_ns_(yield_after_ns), watch_(watch), slot_(slot) {}

Engine::~Engine() { stop(); }

void Engine::start() { thread_ = std::thread([this] { run(); }); }

void Engine::stop() {
    if (!thread_.joinable()) return;
    stopping_.store(true, std::memory_order_release);
    group_->wake_all();
    thread_.join();
}

void Engine::run() {
    tid_.store(current_tid(), std::memory_order_release);
    StallWatch::bind_current_thread(watch_, slot_);
    if (cpu_ >= 0 && affinity::pin_current_thread(cpu_) != DP_OK)
        DP_LOG_WARN("mover engine runs unpinned: CPU {} is not available", cpu_);
    uint64_t idle_since = 0;
    unsigned idle_polls = 0;
    // The last clock read while idle, and where the current burst began
    // (0: no burst): EngineCounters::busy_ns.
    uint64_t idle_clock = timing::now_ns(), burst_start = 0;
    for (;;) {
        // Held in a submitter's call, and replaced meanwhile: once the call
        // returned and its descriptor finished, the relief serves instead.
        if (slot_->held.load(std::memory_order_acquire)) break;
        if (burst_start == 0) worked_since_ = idle_clock;
        if (serve_once()) {
            if (burst_start == 0) burst_start = idle_clock;
            idle_since = 0;
            continue;
        }
        if (burst_start != 0) {
            idle_clock = timing::now_ns();
            bump(counters_.busy_ns, idle_clock - burst_start);
            burst_start = 0;
        }
        // Stop only once every queue is empty: close() finishes submitted work.
        if (stopping_.load(std::memory_order_acquire)) {
            if (!serve_once()) break;
            continue;
        }
        if (idle_yield_) {
            sched_yield();  // (a system call: the clock is cheap beside it)
        } else {
            cpu_relax();
            if (++idle_polls % kIdleClockPolls != 0) continue;
        }
        uint64_t now = timing::now_ns();
        idle_clock = now;
        if (idle_since == 0) {
            idle_since = now;
        } else if (now - idle_since >= idle_spin_ns_) {
            sleep();
            idle_since = 0;
            idle_clock = timing::now_ns();
        }
    }
    if (burst_start != 0) bump(counters_.busy_ns, timing::now_ns() - burst_start);
    StallWatch::bind_current_thread(nullptr, nullptr);
    slot_->exited.store(true, std::memory_order_release);
}

bool Engine::serve_once() {
    bool worked = false;
    for (WqState *wq : group_->wqs) {
        if (wq->draining.load(std::memory_order_relaxed) != 0) continue;
        for (uint32_t turn = 0; turn < wq->config.priority; ++turn) {
            dp_desc_t desc;
            uint32_t pasid;
            uint64_t position;
            bool got = wq->ring.pop(
                &desc, &pasid, &position,
                [wq] { wq->inflight.fetch_add(1, std::memory_order_relaxed); },
                [wq] { wq->inflight.fetch_sub(1, std::memory_order_relaxed); });
            if (!got) break;
            worked = true;
            if (desc.opcode == DP_OP_DRAIN) {
                // A drain does not wait for itself (nor for another drain).
                wq->inflight.fetch_sub(1, std::memory_order_release);
                process(wq, desc, pasid);
            } else {
                process(wq, desc, pasid);
                // Release: this descriptor's writes happen before a DRAIN
                // that sees the count drop.
                wq->inflight.fetch_sub(1, std::memory_order_release);
                // (DeviceConfig::yield_after_ns: engines sharing CPUs)
                if (yield_after_ns_ != 0) {
                    if (timing::now_ns() - worked_since_ >= yield_after_ns_) {
                        sched_yield();
                        worked_since_ = timing::now_ns();
                    }
                }
            }
            if (slot_->held.load(std::memory_order_acquire)) return true;
        }
    }
    return worked;
}

void Engine::process(WqState *wq, const dp_desc_t &desc, uint32_t pasid) {
    const AddressSpace *space = spaces_->enter(pasid);
    if (space == nullptr) {
        // Its submitter left (the agent retired its space) or never was:
        // nobody is there to report to, and its memory may be gone.
        DP_LOG_DEBUG("{}: descriptor of retired address space {:#x} dropped", wq->config.name,
                     pasid);
        bump(counters_.dropped, 1);
        return;
    }
    OpResult result;
    bool reported = true;
    if (desc.opcode == DP_OP_DRAIN) {
        dp_completion_t *record = resolve_completion(desc, *space, &reported);
        if (reported) {
            if (desc.flags & ~uint32_t(DP_FLAG_COMPLETION)) result.status = DP_COMP_INVALID_FLAGS;
            else if (desc.src || desc.dst || desc.src2 || desc.size || desc.aux || desc.dtype ||
                     desc.redop || desc.op_flags)
                result.status = DP_COMP_INVALID_FIELD;
            else if (!space->orders_own_drains()) drain(wq);
            if (record) publish_completion(record, result, desc.user);
        }
    } else {
        reported = space->run(desc, wq->limits, &result);
    }
    if (!reported) {
        // Like DSA's software error register: a descriptor that cannot
        // report does not run.
        space->report_lost(desc, wq->config.name.c_str());
        bump(counters_.lost_completions, 1);
        bump(counters_.failed, 1);
    }
    space->finished(desc);
    spaces_->leave(pasid);
    if (!reported) return;
    bump(counters_.completed, 1 + result.members);
    bump(counters_.failed, (is_success(result.status) ? 0 : 1) + result.member_failures);
    // A batch's record counts members in bytes; its members' bytes are apart.
    bump(counters_.bytes, desc.opcode == DP_OP_BATCH ? result.member_bytes : result.bytes);
}

void Engine::drain(WqState *wq) {
    wq->draining.fetch_add(1, std::memory_order_relaxed);
    // Every descriptor claimed before this drain counted itself in inflight
    // before its claim (see WorkQueue::pop), so zero means all are done.
    while (wq->inflight.load(std::memory_order_acquire) != 0) cpu_relax();
    wq->draining.fetch_sub(1, std::memory_order_relaxed);
}

void Engine::sleep() {
    // Idle: the bounce buffers this thread kept for reuse go back to the
    // system (common/scratch.h).
    scratch::trim();
    uint32_t ticket = group_->doorbell.load(std::memory_order_acquire);
    group_->sleepers.fetch_add(1, std::memory_order_relaxed);
    // Pairs with GroupState::ring_doorbell(): after this fence either we see
    // the descriptor a submitter pushed, or it sees us in `sleepers`.
    doorbell_fence();
    bool work = stopping_.load(std::memory_order_acquire);
    for (WqState *wq : group_->wqs) work = work || wq->ring.maybe_nonempty();
    if (!work) futex_wait(reinterpret_cast<uint32_t *>(&group_->doorbell), ticket, kSleepCapNs);
    group_->sleepers.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace deputy::mover
