// The network side: libfabric's providers (what `fi_info -l` lists), RDMA
// devices with their ports' state, rate, link layer and RoCE mode, their
// PCIe link width and speed against the slot's maximum, and the speed of
// the machine's physical network interfaces.
#include <fmt/format.h>
#include <rdma/fabric.h>

#include <set>

#include "cli/doctor/finding.h"

namespace deputy::doctor {
namespace {

std::string line_of(const Probe &p, const std::string &path) {
    std::string v, error;
    return p.read_line(path, &v, &error) ? v : "";
}

void providers(std::vector<Finding> *out) {
    const uint32_t v = fi_version();
    fi_info *list = nullptr;
    const int rc = fi_getinfo(v, nullptr, nullptr, 0, nullptr, &list);
    std::set<std::string> names;
    for (fi_info *i = list; i; i = i->next)
        if (i->fabric_attr && i->fabric_attr->prov_name) names.insert(i->fabric_attr->prov_name);
    if (list) fi_freeinfo(list);
    const std::string version = fmt::format("libfabric {}.{}", FI_MAJOR(v), FI_MINOR(v));
    if (rc != 0 || names.empty()) {
        out->push_back({"fabric", "providers", Status::warn,
                        version + ": no provider answers (fi_getinfo: " + fi_strerror(-rc) + ")",
                        "install libfabric's providers (Debian: libfabric1); FI_PROVIDER may "
                        "exclude them"});
        return;
    }
    std::string all;
    for (const std::string &n : names) all += (all.empty() ? "" : ", ") + n;
    const bool rdma = names.count("verbs") || names.count("efa") || names.count("psm3") ||
                      names.count("cxi") || names.count("opx");
    out->push_back({"fabric", "providers", rdma ? Status::ok : Status::info,
                    version + ": " + all +
                        (rdma ? "" : " (no RDMA provider: RDMA paths run over tcp)"),
                    ""});
}

void pcie(const Probe &p, const std::string &name, const std::string &device_dir,
          std::vector<Finding> *out) {
    const std::string width = line_of(p, device_dir + "/current_link_width");
    const std::string max_width = line_of(p, device_dir + "/max_link_width");
    const std::string speed = line_of(p, device_dir + "/current_link_speed");
    const std::string max_speed = line_of(p, device_dir + "/max_link_speed");
    if (width.empty()) return;
    const std::string what = fmt::format("PCIe x{} at {} (slot and device allow x{} at {})", width,
                                         speed, max_width, max_speed);
    if (width != max_width || speed != max_speed)
        out->push_back({"fabric", name + " pcie", Status::warn,
                        what + ": the link runs below what the device can do",
                        "move the card to a slot of full width and generation, or check the "
                        "BIOS's bifurcation and link-speed settings"});
    else
        out->push_back({"fabric", name + " pcie", Status::ok, what, ""});
}

void rdma_devices(const Probe &p, std::vector<Finding> *out) {
    std::string error;
    const std::vector<std::string> devices = p.list("/sys/class/infiniband", &error);
    if (devices.empty()) {
        out->push_back({"fabric", "rdma", Status::info,
                        "no RDMA device (/sys/class/infiniband empty or absent)", ""});
        return;
    }
    for (const std::string &dev : devices) {
        const std::string dir = "/sys/class/infiniband/" + dev;
        std::string ports_error;
        for (const std::string &port : p.list(dir + "/ports", &ports_error)) {
            const std::string pd = dir + "/ports/" + port;
            const std::string state = line_of(p, pd + "/state");
            const std::string layer = line_of(p, pd + "/link_layer");
            std::string what = fmt::format("port {}: {}, {}, {}", port, state.empty() ? "?" : state,
                                           line_of(p, pd + "/rate"), layer);
            if (layer == "Ethernet") {
                const std::string mode = line_of(p, pd + "/gid_attrs/types/0");
                what += ", GID 0 " + (mode.empty() ? std::string("(mode not readable)") : mode);
            }
            const bool active = state.find("ACTIVE") != std::string::npos;
            out->push_back({"fabric", dev, active ? Status::ok : Status::warn, what,
                            active ? "" : "check the cable and the switch port (ibstat, ip link)"});
        }
        pcie(p, dev, dir + "/device", out);
    }
}

void interfaces(const Probe &p, std::vector<Finding> *out) {
    std::string error;
    for (const std::string &nic : p.list("/sys/class/net", &error)) {
        const std::string dir = "/sys/class/net/" + nic;
        if (!p.exists(dir + "/device")) continue;  // virtual (lo, veth, bridges)
        const std::string speed = line_of(p, dir + "/speed");
        const std::string state = line_of(p, dir + "/operstate");
        out->push_back({"fabric", nic, Status::info,
                        fmt::format("{}, {}", state.empty() ? "state ?" : state,
                                    speed.empty() || speed[0] == '-' ? "speed not shown"
                                                                     : speed + " Mb/s"),
                        ""});
        pcie(p, nic, dir + "/device", out);
    }
}

}  // namespace

void check_fabric(const Probe &p, std::vector<Finding> *out) {
    providers(out);
    rdma_devices(p, out);
    interfaces(p, out);
}

}  // namespace deputy::doctor
