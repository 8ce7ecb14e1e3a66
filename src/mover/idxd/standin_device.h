// A stand-in for a DSA work queue and its engine, for machines without the
// device (this one): it takes the same 64-byte descriptors a portal takes,
// in an ordinary page, and executes them with the mover's software kernels
// as the DSA specification describes each opcode — completion records,
// partial completion on a page fault, batches with fences, drains, ENQCMD's
// refusals. Tests and `deputy bench mover --wq standin` drive the idxd
// backend through it; it is not a faster mover (one thread, in order).
//
// Faults are made on purpose: a page marked not present faults on its first
// access like a page the IOMMU has no translation for; the report (or, with
// block-on-fault, the device's own wait) makes it present.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>

#include "mover/idxd/dsa_abi.h"

namespace deputy::mover::idxd {

class StandInDevice {
public:
    struct Options {
        uint32_t queue_size = 32;               // descriptors the page holds at once
        uint32_t max_batch_size = 1024;
        uint64_t max_transfer_size = 1ull << 31;
        bool block_on_fault = false;            // the queue's block_on_fault
        // Execute each descriptor inside the portal write, on the writing
        // thread, with no device thread: what the submission path costs
        // without a second thread's hand-off (`--wq standin/inline`).
        bool inline_execution = false;
    };
    struct Counters {
        uint64_t executed = 0;   // descriptors (batch members included)
        uint64_t refused = 0;    // portal writes refused (full, or refuse_next)
        uint64_t faults = 0;     // partial completions reported for a page fault
        uint64_t blocked = 0;    // faults the device waited out (block on fault)
    };

    explicit StandInDevice(const Options &options);
    ~StandInDevice();  // executes what was written, then stops
    StandInDevice(const StandInDevice &) = delete;
    StandInDevice &operator=(const StandInDevice &) = delete;

    // One portal write. `shared`: ENQCMD's contract (may be refused: false);
    // otherwise MOVDIR64B's (the submitter never has more outstanding than
    // the queue's size; a write past it waits for room here, where the
    // device would drop it).
    bool write(const dsa_hw_desc &desc, bool shared);

    // --- what tests make happen ---
    void refuse_next(uint32_t writes) { refuse_.store(writes, std::memory_order_relaxed); }
    void mark_not_present(const void *address);  // the page holding it
    Counters counters() const;
    const Options &options() const { return options_; }

private:
    static constexpr uint32_t kSlots = 63;  // 63 descriptors and one line of indices: one page

    void run();
    void execute(const dsa_hw_desc &desc);
    uint8_t execute_one(const dsa_hw_desc &desc, dsa_completion_record *record);
    uint8_t execute_batch(const dsa_hw_desc &desc, dsa_completion_record *record);
    // The offset of the first byte of [p, p+n) on a not-present page
    // (n when none), and that page made present when `resolve`.
    uint64_t first_fault(uint64_t p, uint64_t n);
    void make_present(uint64_t address);

    struct alignas(4096) Page {
        dsa_hw_desc slot[kSlots];
        alignas(64) std::atomic<uint32_t> tail{0};  // written by portal writes
        std::atomic<uint32_t> head{0};              // advanced by the device
        std::atomic<uint32_t> sleeping{0};
    };
    static_assert(sizeof(Page) == 4096);

    Options options_;
    Page *page_;
    std::atomic_flag writing_ = ATOMIC_FLAG_INIT;  // one portal write at a time
    std::atomic<uint32_t> refuse_{0};
    std::atomic<bool> stopping_{false};
    mutable std::mutex mutex_;  // guards not_present_ and counters_
    std::set<uint64_t> not_present_;
    Counters counters_;
    std::thread thread_;
};

}  // namespace deputy::mover::idxd
