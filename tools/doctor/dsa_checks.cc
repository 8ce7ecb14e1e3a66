// Intel DSA as the kernel's idxd driver shows it in sysfs: devices, their
// state and SVA (PASID), work queues with their mode, size, priority and
// the permission to open them — what `accel-config list` shows, and what a
// user must set up before a DSA path can use the device.
#include <fmt/format.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <regex>

#include "common/fd.h"
#include "doctor/finding.h"

namespace deputy::doctor {
namespace {

const char *kNoDsaFix =
    "DSA is in 4th-generation Xeon Scalable (Sapphire Rapids) and later: boot with "
    "intel_iommu=on,sm_on, modprobe idxd, then configure queues with accel-config";

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
    static const std::regex device("^dsa[0-9]+$"), queue("^wq([0-9]+)\\.[0-9]+$");
    int devices = 0;
    for (const std::string &dev : names) {
        if (!std::regex_match(dev, device)) continue;
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
        const std::string id = dev.substr(3);
        for (const std::string &wq : names) {
            std::smatch m;
            if (std::regex_match(wq, m, queue) && m[1] == id) work_queue(p, dev, wq, out);
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
