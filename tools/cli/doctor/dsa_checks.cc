// Intel DSA as the mover's idxd backend sees it: the devices and work queues
// libaccel-config reads from the idxd driver (mover/idxd/inventory.h), each
// with the verdict the backend itself would reach and its fix, and the queue
// the backend would pick. One implementation of the diagnosis: the backend's
// own. libaccel-config reads the real /sys whatever --root says.
#include <fmt/format.h>

#include "cli/doctor/finding.h"
#include "mover/idxd/inventory.h"

namespace deputy::doctor {

void check_dsa(const Probe &, std::vector<Finding> *out) {
    using namespace mover::idxd;
    const Inventory inv = read_inventory();
    QueueInfo chosen;
    std::string why;
    const dp_status_t s = choose_queue(inv, "", &chosen, &why);
    if (inv.devices.empty()) {
        // choose_queue's message for no device ends with its fix, after "Fix: ".
        const size_t fix = why.rfind("Fix: ");
        out->push_back({"dsa", "devices", Status::info, "no DSA: " + inv.missing,
                        fix == std::string::npos ? why : why.substr(fix + 5)});
        return;
    }
    for (const DeviceInfo &dev : inv.devices) {
        const Verdict dv = judge_device(dev);
        out->push_back({"dsa", dev.name, dv.usable ? Status::ok : Status::warn, dv.found, dv.fix});
        for (const QueueInfo &q : dev.queues) {
            const Verdict v = judge(dev, q);
            out->push_back({"dsa", dev.name + "/" + q.name, v.usable ? Status::ok : Status::warn,
                            v.found, v.fix});
        }
    }
    if (s == DP_OK)
        out->push_back(
            {"dsa", "backend", Status::ok,
             fmt::format("the mover's idxd backend would use {}/{} ({} queue, {}): \"backend\": "
                         "\"idxd\" in the mover's JSON config, or deputy bench mover --wq {}/{}",
                         chosen.device, chosen.name,
                         chosen.mode == DP_WQ_SHARED ? "shared" : "dedicated", chosen.device_path,
                         chosen.device, chosen.name),
             ""});
    else
        out->push_back({"dsa", "backend", Status::warn,
                        "the mover's idxd backend has no queue to use: " + why,
                        "the fixes above; then \"backend\": \"idxd\" in the mover's JSON config "
                        "or deputy bench mover --wq DEVICE/QUEUE selects it"});
}

}  // namespace deputy::doctor
