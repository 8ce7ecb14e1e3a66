// Intel DSA as the kernel's idxd driver shows it in sysfs: devices, their
// state and SVA (PASID), work queues with their mode, size, priority and
// the permission to open them — what `accel-config list` shows, and what a
// user must set up before a DSA path can use the device.
#include <fmt/format.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>


#include "common/fd.h"
#include "doctor/finding.h"

namespace deputy::doctor {
namespace {

const char *kNoDsaFix =
    "DSA is in 4th-generation Xeon Scalable (Sapphire Rapids) and later: boot with "
    "intel_iommu=on,sm_on, modprobe idxd, then configure queues with accel-config";

bool digits(const std::string &s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// "dsa3": true, *id "3".
bool device_name(const std::string &name, std::string *id) {
    if (name.rfind("dsa", 0) != 0 || !digits(name.substr(3))) return false;
    *id = name.substr(3);
    return true;
}

// "wq3.1": true, *device "3" (its device's number).
bool queue_name(const std::string &name, std::string *device) {
    const size_t dot = name.find('.');
    if (name.rfind("wq", 0) != 0 || dot == std::string::npos || !digits(name.substr(2, dot - 2)) ||
        !digits(name.substr(dot + 1)))
        return false;
    *device = name.substr(2, dot - 2);
    return true;
}

std::string attr(const Probe &p, const std::string &dir, const std::string &name) {
    std::string v, error;
    return p.read_line(dir + "/" + name, &v, &error) ? v : "?";
}

void work_queue(const Probe &p, const std::string &dev, const std::string &wq,
                std::vector<Finding> *out) {
    const std::string dir = "/sys/bus/dsa/devices/" + wq;
    std::string state, error;
    const std::string name = dev + "/" + wq;
    if (!p.read_line(dir + "/state", &state, &error)) {
        out->push_back({"dsa", name, Status::warn, error,
                        "run deputy doctor as a user who may read sysfs"});
        return;
    }
    const std::string what = fmt::format(
        "{} queue, size {}, priority {}, threshold {}, max_batch_size {}, block_on_fault {}, "
        "type {}",
        attr(p, dir, "mode"), attr(p, dir, "size"), attr(p, dir, "priority"),
        attr(p, dir, "threshold"), attr(p, dir, "max_batch_size"),
        attr(p, dir, "block_on_fault"), attr(p, dir, "type"));
    if (state != "enabled") {
        out->push_back({"dsa", name, Status::warn, what + "; " + state,
                        fmt::format("accel-config config-wq {} --mode=dedicated --type=user "
                                    "--name=deputy --size=16 --priority=10 && accel-config "
                                    "enable-wq {}",
                                    name, name)});
        return;
    }
    const std::string node = "/dev/dsa/" + wq;
    if (!p.exists(node)) {
        out->push_back({"dsa", name, Status::warn,
                        what + "; enabled, but " + node + " is missing (a kernel queue?)",
                        "a user queue: accel-config config-wq " + name + " --type=user"});
        return;
    }
    // Opened for real (as a DSA user does before mapping its portal): the
    // mode bits do not tell root's answer, nor an LSM's.
    UniqueFd fd(::open(p.at(node).c_str(), O_RDWR | O_CLOEXEC));
    if (!fd) {
        out->push_back({"dsa", name, Status::warn,
                        what + "; enabled, but " + node + " does not open: " + std::strerror(errno),
                        "sudo chown $USER " + node + " (or a udev rule giving a group access)"});
        return;
    }
    out->push_back({"dsa", name, Status::ok, what + "; enabled, " + node + " opens", ""});
}

}  // namespace

void check_dsa(const Probe &p, std::vector<Finding> *out) {
    std::string error;
    const std::vector<std::string> names = p.list("/sys/bus/dsa/devices", &error);
    if (!p.exists("/sys/bus/dsa")) {
        out->push_back({"dsa", "devices", Status::info,
                        p.exists("/sys/module/idxd") ? "the idxd driver is loaded, but no DSA bus"
                                                     : "no DSA: the idxd driver is not loaded "
                                                       "(/sys/bus/dsa absent)",
                        kNoDsaFix});
        return;
    }
    int devices = 0;
    for (const std::string &dev : names) {
        std::string id;
        if (!device_name(dev, &id)) continue;
        ++devices;
        const std::string dir = "/sys/bus/dsa/devices/" + dev;
        std::string state, pasid, read_error;
        if (!p.read_line(dir + "/state", &state, &read_error)) {
            out->push_back({"dsa", dev, Status::warn, read_error,
                            "run deputy doctor as a user who may read sysfs"});
            continue;
        }
        const bool sva = p.read_line(dir + "/pasid_enabled", &pasid, &read_error) && pasid == "1";
        const std::string what =
            fmt::format("{}; SVA (PASID) {}; max_batch_size {}, max_transfer_size {}", state,
                        sva ? "on" : "off", attr(p, dir, "max_batch_size"),
                        attr(p, dir, "max_transfer_size"));
        if (!sva)
            out->push_back({"dsa", dev, Status::warn,
                            what + ": without SVA a user-space queue cannot take the process's "
                                   "virtual addresses",
                            "boot with intel_iommu=on,sm_on (the IOMMU's scalable mode)"});
        else if (state != "enabled")
            out->push_back({"dsa", dev, Status::warn, what,
                            "accel-config load-config -c CONFIG.json -e (or accel-config "
                            "enable-device " + dev + ")"});
        else
            out->push_back({"dsa", dev, Status::ok, what, ""});
        for (const std::string &wq : names) {
            std::string of;
            if (queue_name(wq, &of) && of == id) work_queue(p, dev, wq, out);
        }
    }
    if (devices == 0)
        out->push_back({"dsa", "devices", Status::info,
                        "the DSA bus is there but has no device" +
                            (error.empty() ? std::string() : " (" + error + ")"),
                        kNoDsaFix});
    else
        out->push_back({"dsa", "backend", Status::info,
                        "deputy's mover does not drive DSA yet: its software engines run",
                        ""});
}

}  // namespace deputy::doctor
