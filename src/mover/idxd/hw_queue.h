// A DSA work queue serving one of the mover's software queues: the engine
// that takes a descriptor from the software queue validates and translates
// it as always (execute.cc), then, instead of running a kernel, builds the
// DSA descriptor, writes it to the portal and waits for the device's
// completion record, which it turns into the mover's. So the C API, the
// agent, address spaces, priorities and waits stay as they are, and the
// device sees only descriptors the mover already checked.
//
// What the device is asked to do is what the software kernels would do:
// every DSA opcode the mover has (REDUCE is deputy's own and runs on the
// CPU). A partial completion on a page fault is resumed after touching the
// page (the delta operations restart whole); an operation longer than the
// device's maximum transfer is cut into several; a status the device should
// never give for a checked descriptor runs the operation on the CPU instead
// and is logged (sources are unchanged until then: overlapping moves stay
// on the CPU for that reason).
#pragma once

#include <deputy/mover.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/log_limiter.h"
#include "mover/execute.h"
#include "mover/idxd/inventory.h"
#include "mover/idxd/portal.h"
#include "mover/idxd/standin_device.h"
#include "mover/kernels.h"

namespace deputy::mover::idxd {

struct HwCounters {
    std::atomic<uint64_t> submitted{0};  // descriptors written to the portal
    std::atomic<uint64_t> retries{0};    // writes a shared queue refused
    std::atomic<uint64_t> faults{0};     // partial completions resumed after a page fault
    std::atomic<uint64_t> fallbacks{0};  // operations the device failed, run on the CPU
};

class HwQueue final : public Offload {
public:
    // `stand_in`: the device behind a stand-in portal (owned here), else null.
    HwQueue(std::unique_ptr<Portal> portal, std::unique_ptr<StandInDevice> stand_in,
            const QueueInfo &queue, dp_wait_mode_t wait);

    // Opens the queue `request` names ("" any, "dsa0", "dsa0/wq0.0"), or a
    // stand-in device ("standin", "standin/shared", "standin/inline": see
    // StandInDevice::Options). DP_ERR_UNSUPPORTED with
    // *why when the machine has no queue this process can use.
    static dp_status_t open(const std::string &request, dp_wait_mode_t wait,
                            std::unique_ptr<HwQueue> *out, std::string *why);

    // Whether the device takes this checked, translated descriptor.
    bool offloads(const dp_desc_t &d, const Buffers &b) const override;
    // Runs it on the device. False when the device failed it (counted and
    // logged): the caller runs it on the CPU.
    bool run(const dp_desc_t &d, const Buffers &b, kernels::Store store, OpResult *out) override;

    // Batches go as one DSA batch descriptor: members the device takes
    // (offloads() and within one transfer), at most the queue's
    // max_batch_size.
    bool batchable(const dp_desc_t &d, const Buffers &b) const override;
    uint32_t max_batch_size() const override { return queue_.max_batch_size; }
    void run_batch(const BatchMember *members, size_t count, OpResult *results,
                   MemberOutcome *outcomes) override;

    const QueueInfo &queue() const { return queue_; }
    const HwCounters &counters() const { return counters_; }
    StandInDevice *stand_in() const { return stand_in_.get(); }
    // "dsa0/wq0.0 (dedicated, size 16)" or "stand-in device (shared, size 32)".
    std::string description() const;

private:
    // The DSA descriptor for bytes [done, done + chunk) of d.
    void build(const dp_desc_t &d, const Buffers &b, kernels::Store store, uint64_t done,
               uint64_t chunk, uint32_t crc, dsa_completion_record *record, dsa_hw_desc *out) const;
    // Folds a successful record into *r; true when the operation is over
    // (a difference found, a delta record overflowed).
    bool read(const dp_desc_t &d, const dsa_completion_record &record, uint64_t done,
              uint32_t *crc, OpResult *r) const;
    void fault_in(const dsa_completion_record &record);
    void log_fallback(const dp_desc_t &d, uint8_t status);
    void submit(const dsa_hw_desc &desc);
    void wait(const dsa_completion_record &record) const;

    std::unique_ptr<StandInDevice> stand_in_;  // (outlives portal_: declared first)
    std::unique_ptr<Portal> portal_;
    QueueInfo queue_;
    dp_wait_mode_t wait_;
    HwCounters counters_;
    LogLimiter fallback_log_{"mover: DSA operations run on the CPU"};
};

}  // namespace deputy::mover::idxd
