// Runtime state shared by submitters and engines: a work queue with its
// limits and in-flight count, and a group (queues + the doorbell its engines
// sleep on).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "mover/config.h"
#include "mover/execute.h"
#include "mover/work_queue.h"

namespace deputy::mover {

struct GroupState;

// The full fence of the doorbell's Dekker handshake (ring_doorbell() and
// Engine::sleep()). GCC refuses std::atomic_thread_fence under
// -fsanitize=thread (-Wtsan, an error with -Werror: TSan does not model
// fences), so ThreadSanitizer builds issue the x86 instruction itself. The
// fence only decides whether a sleeping engine is woken now or at its sleep
// cap; descriptors are published by the ring's release/acquire pairs, which
// TSan does see.
inline void doorbell_fence() {
#if defined(__SANITIZE_THREAD__)
    asm volatile("mfence" ::: "memory");
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

struct WqState {
    WqConfig config;
    ExecLimits limits;
    WorkQueue ring;
    std::unique_ptr<void, void (*)(void *)> memory{nullptr, nullptr};
    GroupState *group = nullptr;
    // Descriptors claimed by an engine and not yet finished, counted from
    // just before the claim so a DRAIN that claims later sees them.
    alignas(64) std::atomic<uint32_t> inflight{0};
    // Non-zero while a DRAIN waits: engines take nothing new from this queue.
    std::atomic<uint32_t> draining{0};
    alignas(64) std::atomic<uint64_t> retries{0};
};

struct GroupState {
    std::vector<WqState *> wqs;  // highest priority first
    // Doorbell: engines that found every queue empty sleep on this word;
    // submitters bump it and wake them only when `sleepers` says someone
    // sleeps, so the common path costs no system call.
    alignas(64) std::atomic<uint32_t> doorbell{0};
    std::atomic<uint32_t> sleepers{0};

    void ring_doorbell() {
        // Pairs with the fence in Engine::sleep(): either the engine sees the
        // new descriptor or we see it sleeping (a Dekker handshake).
        doorbell_fence();
        if (sleepers.load(std::memory_order_relaxed) != 0) wake_all();
    }
    void wake_all();
};

}  // namespace deputy::mover
