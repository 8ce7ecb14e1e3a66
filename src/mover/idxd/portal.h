// Where descriptors go: a work queue's portal. On DSA it is the page the
// idxd driver maps from /dev/dsa/wqD.Q, written with MOVDIR64B (dedicated
// queue: the write always lands; the submitter keeps its own count within
// the queue's size) or ENQCMD (shared queue: the device may refuse, and the
// instruction says so). Where the machine has no DSA, a stand-in device
// (standin_device.h) takes the same 64-byte writes into an ordinary page and
// executes them, so everything around the instruction is tested here.
#pragma once

#include <deputy/mover.h>
#include <deputy/status.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "mover/idxd/dsa_abi.h"
#include "mover/idxd/inventory.h"

namespace deputy::mover::idxd {

class StandInDevice;

// The CPU's enqueue-store instructions (CPUID leaf 7, ECX bits 28 and 29).
bool cpu_has_movdir64b();
bool cpu_has_enqcmd();

class Portal {
public:
    // Maps the portal of `queue`. DP_ERR_UNSUPPORTED with *why when the CPU
    // lacks the queue's instruction or the device file does not open or map.
    static dp_status_t map(const QueueInfo &queue, std::unique_ptr<Portal> *out, std::string *why);
    // A portal into a stand-in device, in the given mode.
    static std::unique_ptr<Portal> stand_in(StandInDevice *device, dp_wq_mode_t mode);
    ~Portal();
    Portal(const Portal &) = delete;
    Portal &operator=(const Portal &) = delete;

    // Writes one descriptor (64-byte aligned). False when a shared queue
    // refused it (full, or the device is busy): submit again later.
    bool submit(const dsa_hw_desc &desc);

    dp_wq_mode_t mode() const { return mode_; }
    bool is_stand_in() const { return stand_in_ != nullptr; }

private:
    Portal() = default;

    dp_wq_mode_t mode_ = DP_WQ_DEDICATED;
    void *page_ = nullptr;  // the mapped portal (hardware)
    int fd_ = -1;
    StandInDevice *stand_in_ = nullptr;
};

}  // namespace deputy::mover::idxd
