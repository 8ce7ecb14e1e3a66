// The DSA devices and work queues of this machine, as libaccel-config reads
// them from the idxd driver's sysfs, and the verdict on each queue: can this
// process submit to it, and if not, what is missing and which command or
// boot option changes it. The mover's idxd backend picks its queue here;
// `deputy doctor` prints the same inventory and verdicts.
#pragma once

#include <deputy/mover.h>
#include <deputy/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deputy::mover::idxd {

struct QueueInfo {
    std::string device;       // "dsa0"
    std::string name;         // "wq0.0"
    std::string device_path;  // "/dev/dsa/wq0.0": the character device whose page is the portal
    bool enabled = false;
    std::string type;         // "user", "kernel", "none"
    dp_wq_mode_t mode = DP_WQ_DEDICATED;
    uint32_t size = 0;
    uint32_t priority = 0;
    uint32_t threshold = 0;   // shared queues: descriptors ENQCMD may queue
    uint32_t max_batch_size = 0;
    uint64_t max_transfer_size = 0;
    bool block_on_fault = false;
    int group = -1;
};

struct DeviceInfo {
    std::string name;          // "dsa0"
    bool enabled = false;
    bool sva = false;          // pasid_enabled: user queues take virtual addresses
    int numa_node = -1;
    uint32_t max_batch_size = 0;
    uint64_t max_transfer_size = 0;
    uint32_t max_engines = 0;
    uint32_t max_groups = 0;
    uint32_t max_work_queues = 0;
    std::vector<QueueInfo> queues;
};

struct Inventory {
    std::vector<DeviceInfo> devices;
    // Why `devices` is empty when it is ("the idxd driver is not loaded:
    // /sys/bus/dsa absent"); empty otherwise.
    std::string missing;
};

// Reads the machine's devices and queues through libaccel-config.
Inventory read_inventory();

// Whether this process can submit to `queue` of `device`, and if not why.
struct Verdict {
    bool usable = false;
    std::string found;  // what was seen ("dedicated queue, size 16, ...; enabled, /dev/dsa/wq0.0 opens")
    std::string fix;    // the command or boot option that makes it usable; empty when usable
};
Verdict judge(const DeviceInfo &device, const QueueInfo &queue);
// The device's part of judge() (SVA, then enabled), for a device whatever
// its queues: what `deputy doctor` says of the device itself.
Verdict judge_device(const DeviceInfo &device);

// Picks the queue a request names: "" (the first usable queue of any
// device), "dsa0" (the first usable queue of that device) or "dsa0/wq0.0".
// DP_ERR_UNSUPPORTED when none is usable, with *why naming what is missing
// and its fix (no device, device disabled, no SVA, queue disabled or a
// kernel queue, no permission to open its device file); DP_ERR_INVALID for
// a request that is not of those forms.
dp_status_t choose_queue(const Inventory &inventory, const std::string &request, QueueInfo *out,
                         std::string *why);

}  // namespace deputy::mover::idxd
