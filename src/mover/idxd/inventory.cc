// The verdicts on the DSA inventory's devices and queues, and the choice
// of a queue (inventory.h). The inventory itself is read in
// inventory_reader.cc.
#include "mover/idxd/inventory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "common/log.h"

namespace deputy::mover::idxd {
namespace {

#if DEPUTY_HAVE_ACCEL_CONFIG
const char *const kNoDsaFix =
    "DSA is in 4th-generation Xeon Scalable (Sapphire Rapids) and later: boot with "
    "intel_iommu=on,sm_on, modprobe idxd, then configure queues with accel-config";
#else
const char *const kNoDsaFix =
    "run on an x86-64 host with DSA (4th-generation Xeon Scalable and later), with a build "
    "of deputy that has libaccel-config";
#endif

// "dsa3": true.
bool device_form(const std::string &s) {
    return s.size() > 3 && s.rfind("dsa", 0) == 0 &&
           s.find_first_not_of("0123456789", 3) == std::string::npos;
}

// "wq3.1": true.
bool queue_form(const std::string &s) {
    const size_t dot = s.find('.');
    auto digits = [](const std::string &t) {
        return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
    };
    return s.rfind("wq", 0) == 0 && dot != std::string::npos && digits(s.substr(2, dot - 2)) &&
           digits(s.substr(dot + 1));
}

std::string describe(const QueueInfo &q) {
    return fmt::format(
        "{} queue, size {}, priority {}, threshold {}, max_batch_size {}, block_on_fault {}, "
        "type {}",
        q.mode == DP_WQ_SHARED ? "shared" : "dedicated", q.size, q.priority, q.threshold,
        q.max_batch_size, q.block_on_fault ? 1 : 0, q.type);
}

std::string describe(const DeviceInfo &d) {
    return fmt::format("{}; SVA (PASID) {}; max_batch_size {}, max_transfer_size {}",
                       d.enabled ? "enabled" : "disabled", d.sva ? "on" : "off",
                       d.max_batch_size, d.max_transfer_size);
}

std::string names_of(const Inventory &inv) {
    std::string s;
    for (const DeviceInfo &d : inv.devices) s += (s.empty() ? "" : ", ") + d.name;
    return s;
}

std::string queues_of(const DeviceInfo &d) {
    std::string s;
    for (const QueueInfo &q : d.queues) s += (s.empty() ? "" : ", ") + d.name + "/" + q.name;
    return s.empty() ? "none" : s;
}

std::string config_wq_fix(const std::string &name) {
    return fmt::format(
        "accel-config config-wq {} --mode=dedicated --type=user --name=deputy --size=16 "
        "--priority=10 && accel-config enable-wq {}",
        name, name);
}

std::string no_device_why(const Inventory &inv) {
    return "no DSA device: " + (inv.missing.empty() ? std::string("none found") : inv.missing) +
           ". Fix: " + kNoDsaFix;
}

std::string unusable(const std::string &name, const Verdict &v) {
    return name + ": " + v.found + ". Fix: " + v.fix;
}

// Why none of `device`'s queues is usable, each named with its fix.
std::string device_why(const DeviceInfo &d) {
    const Verdict dv = judge_device(d);
    if (!dv.usable) return unusable(d.name, dv);
    if (d.queues.empty())
        return d.name + ": enabled, but has no work queue. Fix: " +
               config_wq_fix(d.name + "/wq" + d.name.substr(3) + ".0");
    std::string s;
    for (const QueueInfo &q : d.queues)
        s += (s.empty() ? "" : "; ") + unusable(d.name + "/" + q.name, judge(d, q));
    return s;
}

}  // namespace

Verdict judge_device(const DeviceInfo &device) {
    Verdict v;
    v.found = describe(device);
    if (!device.sva) {
        v.found += ": without SVA a user-space queue cannot take the process's virtual addresses";
        v.fix = "boot with intel_iommu=on,sm_on (the IOMMU's scalable mode)";
    } else if (!device.enabled) {
        v.fix = "accel-config load-config -c CONFIG.json -e (or accel-config enable-device " +
                device.name + ")";
    } else {
        v.usable = true;
    }
    return v;
}

Verdict judge(const DeviceInfo &device, const QueueInfo &queue) {
    Verdict v;
    const std::string what = describe(queue);
    const std::string name = device.name + "/" + queue.name;
    const std::string state = queue.enabled ? "enabled" : "disabled";
    if (const Verdict dv = judge_device(device); !dv.usable) {
        v.found = what + "; " + state + ", but its device " + device.name + " is " + dv.found;
        v.fix = dv.fix;
        return v;
    }
    if (!queue.enabled) {
        v.found = what + "; disabled";
        v.fix = config_wq_fix(name);
        return v;
    }
    if (queue.type != "user") {
        v.found = what + "; enabled, but a " + queue.type +
                  " queue: only a user queue has a device file a process can map";
        v.fix = fmt::format(
            "accel-config disable-wq {} && accel-config config-wq {} --type=user "
            "--name=deputy && accel-config enable-wq {}",
            name, name, name);
        return v;
    }
    struct stat st;
    if (::stat(queue.device_path.c_str(), &st) != 0) {
        const int err = errno;
        v.found = what + "; enabled, but " + queue.device_path + " is missing (" +
                  std::strerror(err) + ")";
        v.fix = "the idxd driver makes " + queue.device_path +
                " when it enables a user queue: check `ls -l /dev/dsa` (in a container, pass "
                "the device in: --device " + queue.device_path + ")";
        return v;
    }
    // Opened for real, as the backend does before mapping the portal: the
    // mode bits tell neither root's answer nor an LSM's.
    UniqueFd fd(::open(queue.device_path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd) {
        const int err = errno;
        v.found = what + "; enabled, but " + queue.device_path +
                  " does not open: " + std::strerror(err);
        if (err == EACCES || err == EPERM)
            v.fix = "sudo chown $USER " + queue.device_path +
                    " (or a udev rule giving a group access)";
        else if (err == EBUSY)
            v.fix = "a dedicated queue takes one process at a time: stop the one using it (fuser " +
                    queue.device_path + ") or use a shared queue";
        else
            v.fix = queue.device_path +
                    " should be the queue's character device, made by the idxd driver: check "
                    "`ls -l " + queue.device_path + "`";
        return v;
    }
    v.usable = true;
    v.found = what + "; enabled, " + queue.device_path + " opens";
    return v;
}

dp_status_t choose_queue(const Inventory &inventory, const std::string &request, QueueInfo *out,
                         std::string *why) {
    std::string device_name, queue_name;
    if (const size_t slash = request.find('/'); slash == std::string::npos) {
        device_name = request;
    } else {
        device_name = request.substr(0, slash);
        queue_name = request.substr(slash + 1);
    }
    if (!request.empty() &&
        (!device_form(device_name) ||
         (request.find('/') != std::string::npos && !queue_form(queue_name)))) {
        *why = "DSA queue '" + request +
               "' is not of the form DEVICE or DEVICE/QUEUE (\"dsa0\", \"dsa0/wq0.0\"), nor empty "
               "(any usable queue)";
        return DP_ERR_INVALID;
    }
    if (inventory.devices.empty()) {
        *why = no_device_why(inventory);
        return DP_ERR_UNSUPPORTED;
    }
    if (device_name.empty()) {
        for (const DeviceInfo &d : inventory.devices)
            for (const QueueInfo &q : d.queues)
                if (judge(d, q).usable) {
                    *out = q;
                    return DP_OK;
                }
        std::string s;
        for (const DeviceInfo &d : inventory.devices) s += (s.empty() ? "" : "; ") + device_why(d);
        *why = "no usable DSA queue: " + s;
        return DP_ERR_UNSUPPORTED;
    }
    const DeviceInfo *device = nullptr;
    for (const DeviceInfo &d : inventory.devices)
        if (d.name == device_name) device = &d;
    if (device == nullptr) {
        *why = "no DSA device " + device_name + " here; the DSA devices are " + names_of(inventory);
        return DP_ERR_UNSUPPORTED;
    }
    if (queue_name.empty()) {
        for (const QueueInfo &q : device->queues)
            if (judge(*device, q).usable) {
                *out = q;
                return DP_OK;
            }
        *why = "no usable queue on " + device_name + ": " + device_why(*device);
        return DP_ERR_UNSUPPORTED;
    }
    for (const QueueInfo &q : device->queues) {
        if (q.name != queue_name) continue;
        const Verdict v = judge(*device, q);
        if (!v.usable) {
            *why = "DSA queue " + unusable(request, v);
            return DP_ERR_UNSUPPORTED;
        }
        *out = q;
        return DP_OK;
    }
    *why = "no queue " + queue_name + " on " + device_name + "; its queues are " +
           queues_of(*device);
    return DP_ERR_UNSUPPORTED;
}

}  // namespace deputy::mover::idxd
