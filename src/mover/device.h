// The mover device: work queues, groups and engines built from a validated
// DeviceConfig. In-process users reach it through the C API (mover_api.cc);
// the agent hosts one for its clients, each with its own address space.
#pragma once

#include <deputy/mover.h>

#include <memory>
#include <string>
#include <vector>

#include "mover/address_space.h"
#include "mover/config.h"
#include "mover/engine.h"
#include "mover/queue_group.h"
#include "mover/space_table.h"
#include "mover/stall_watch.h"
#include "common/log_limiter.h"

namespace deputy::mover {

namespace idxd {
class HwQueue;  // mover/idxd/hw_queue.h: only device.cc needs its definition
}

class Device {
public:
    // Address space ids (PASIDs) available per device; 0 is the local process.
    static constexpr uint32_t kMaxAddressSpaces = SpaceTable::kSlots;
    static constexpr uint32_t kLocalPasid = SpaceTable::kLocal;

    static dp_status_t create(const DeviceConfig &config, std::unique_ptr<Device> *out,
                              std::string *error);
    ~Device();
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    // Queues a copy of desc on queue `wq` for address space `pasid`.
    dp_status_t submit(uint32_t wq, const dp_desc_t &desc, uint32_t pasid = kLocalPasid) {
        if (wq >= wqs_.size()) return DP_ERR_INVALID;
        WqState &q = *wqs_[wq];
        // A shared queue's threshold refuses before the ring is full.
        bool queued = q.config.mode == DP_WQ_DEDICATED
                          ? q.ring.push_dedicated(desc, pasid)
                          : (q.config.threshold == 0 || q.ring.occupancy() < q.config.threshold) &&
                                q.ring.push_shared(desc, pasid);
        if (!queued) {
            q.retries.fetch_add(1, std::memory_order_relaxed);
            return DP_ERR_RETRY;
        }
        q.group->ring_doorbell();
        return DP_OK;
    }

    // Starts the engines (create() does, unless config.start_engines is false).
    void start_engines();
    // Finishes queued work and joins the engines. Idempotent.
    void stop_engines();

    // Registers an address space; returns its PASID or DP_ERR_NOMEM when full.
    // Only one thread (the device's owner) adds, retires and releases.
    dp_status_t add_address_space(const AddressSpace *space, uint32_t *pasid) {
        return spaces_.add(space, pasid);
    }
    // Stops all work of a PASID without waiting: descriptors still queued are
    // dropped, and the space must outlive those running until
    // address_space_idle(); then release_address_space() frees its slot.
    void retire_address_space(uint32_t pasid) { spaces_.retire(pasid); }
    bool address_space_idle(uint32_t pasid) const { return spaces_.idle(pasid); }
    void release_address_space(uint32_t pasid) { spaces_.release(pasid); }

    // --- engines held by a submitter (stall_watch.h); the owner's ---
    // Engines inside one submitter call for longer than limit_ns count as
    // held (0, the default: never). The agent sets it once, before work.
    void watch_held_engines(uint64_t limit_ns) { watch_->set_limit_ns(limit_ns); }
    // Gives every newly held engine a relief in its group and joins held
    // engines that have left. Returns the engines held now. Cheap: call it
    // every few milliseconds.
    uint32_t relieve_held_engines();
    // Some engine is inside a submitter call now (the owner then looks
    // again soon rather than sleeping long).
    bool engines_in_calls() const;

    void stats(dp_mover_stats_t *out) const;
    // The engines, in creation order (engine e pinned to config().cpus[e % n]).
    const std::vector<std::unique_ptr<Engine>> &engines() const { return engines_; }
    const DeviceConfig &config() const { return config_; }
    uint32_t num_wqs() const { return uint32_t(wqs_.size()); }
    uint64_t nt_threshold() const { return nt_threshold_; }
    // The DSA queue the engines hand descriptors to (backend "idxd"), or
    // nullptr: the software kernels run them.
    const idxd::HwQueue *hw_queue() const { return hw_.get(); }
    // What runs the descriptors, and with backend "idxd" and no usable
    // queue, why not: "software engines", "DSA dsa0/wq0.0 (dedicated, size
    // 16)", "software engines (idxd: no DSA device: ...)".
    const std::string &backend_description() const { return backend_; }

private:
    Device() = default;

    DeviceConfig config_;
    uint64_t nt_threshold_ = kDefaultNtThreshold;
    std::unique_ptr<idxd::HwQueue> hw_;  // (outlives the engines: they stop in ~Device)
    std::string backend_ = "software engines";
    std::vector<std::unique_ptr<WqState>> wqs_;
    std::vector<std::unique_ptr<GroupState>> groups_;
    std::vector<std::unique_ptr<Engine>> engines_;
    SpaceTable spaces_;
    LocalAddressSpace local_;
    std::unique_ptr<StallWatch> watch_;
    EngineCounters left_;  // counters of held engines that have left
    LogLimiter relief_log_{"mover: held engines"};
    bool started_ = false;
};

// The local device behind a C handle; nullptr for one an agent hosts.
const Device *local_device(const dp_mover_t *mover);

}  // namespace deputy::mover
