#include "bench/rail/pcie_groups.h"

#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <tuple>

#include "bench/rail/rail_error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace deputy::rail {
namespace {

struct Hwloc {
    hwloc_topology_t topo = nullptr;
    Hwloc() {
        if (hwloc_topology_init(&topo) != 0) throw RailError("--domain pcie: hwloc_topology_init failed");
        // The whole PCIe tree (every bridge, so hops count real switches) and
        // the OS devices that name GPUs and NICs.
        hwloc_topology_set_type_filter(topo, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_ALL);
        hwloc_topology_set_type_filter(topo, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
        hwloc_topology_set_type_filter(topo, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    }
    ~Hwloc() { hwloc_topology_destroy(topo); }
    Hwloc(const Hwloc &) = delete;
    Hwloc &operator=(const Hwloc &) = delete;
};

std::vector<uint64_t> path_of(hwloc_obj_t obj) {
    std::vector<uint64_t> path;
    for (; obj != nullptr; obj = obj->parent) path.push_back(obj->gp_index);
    std::reverse(path.begin(), path.end());
    return path;
}

std::string bus_id(hwloc_obj_t pci) {
    const auto &a = pci->attr->pcidev;
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func);
}

bool is_gpu_class(unsigned class_id) {
    return class_id == 0x0302 || class_id == 0x0380 || (class_id >> 8) == 0x12;
}

IoTree read_tree(hwloc_topology_t topo, std::string source) {
    IoTree tree;
    tree.source = std::move(source);
    // GPUs: PCI devices of a GPU class, or holding a co-processor OS device
    // (CUDA, OpenCL); each named by its bus id and first OS device.
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
         pci = hwloc_get_next_pcidev(topo, pci)) {
        bool gpu = is_gpu_class(pci->attr->pcidev.class_id);
        std::string osdev_name;
        for (hwloc_obj_t os = pci->io_first_child; os != nullptr; os = os->next_sibling) {
            if (os->type != HWLOC_OBJ_OS_DEVICE) continue;
            if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) gpu = true;
            if (osdev_name.empty() && os->name != nullptr) osdev_name = os->name;
        }
        if (!gpu) continue;
        std::string name = "GPU " + bus_id(pci);
        if (!osdev_name.empty()) name += " (" + osdev_name + ")";
        tree.anchors.push_back({name, path_of(pci)});
    }
    tree.anchors_are_gpus = !tree.anchors.empty();
    if (!tree.anchors_are_gpus) {
        const int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
        for (int p = 0; p < packages; ++p) {
            hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, unsigned(p));
            tree.anchors.push_back({fmt::format("package {}", p), path_of(pkg)});
        }
        if (tree.anchors.empty())
            tree.anchors.push_back({"machine", path_of(hwloc_get_root_obj(topo))});
    }
    // NICs: measured from their PCI device, as GPUs are, when they have one.
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr;
         os = hwloc_get_next_osdev(topo, os)) {
        const auto type = os->attr->osdev.type;
        if ((type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) ||
            os->name == nullptr)
            continue;
        hwloc_obj_t at = os->parent && os->parent->type == HWLOC_OBJ_PCI_DEVICE ? os->parent : os;
        tree.nics.push_back({os->name, path_of(at)});
    }
    return tree;
}

// A provider's domain names the NIC `nic` when equal, or when the domain is
// the NIC's name followed by a '-' suffix (efa's "rdmap0s6-rdm").
bool names_nic(const std::string &domain, const std::string &nic) {
    return domain == nic ||
           (domain.size() > nic.size() && domain.compare(0, nic.size(), nic) == 0 &&
            domain[nic.size()] == '-');
}

std::string join(const std::vector<std::string> &items) {
    std::string out;
    for (const auto &s : items) out += (out.empty() ? "" : ", ") + s;
    return out.empty() ? "none" : out;
}

}  // namespace

int tree_hops(const TreeNode &a, const TreeNode &b) {
    size_t common = 0;
    while (common < a.path.size() && common < b.path.size() && a.path[common] == b.path[common])
        ++common;
    return int(a.path.size() + b.path.size() - 2 * common);
}

IoTree load_io_tree() {
    // hwloc reads HWLOC_XMLFILE itself too; reading it here names it in
    // the source and in errors.
    if (const char *xml = std::getenv("HWLOC_XMLFILE"); xml && *xml) {
        IoTree tree = load_io_tree_xml(xml);
        tree.source = std::string("HWLOC_XMLFILE=") + xml;
        return tree;
    }
#if defined(__SANITIZE_ADDRESS__)
    // hwloc's pci plugin (libpciaccess) leaves about 1 KiB allocated for
    // each topology it reads, in a module unloaded by the time LSan looks:
    // not ours to free, and no frame of ours to suppress it by.
    __lsan::ScopedDisabler libpciaccess_leaks;
#endif
    Hwloc h;
    if (hwloc_topology_load(h.topo) != 0)
        throw RailError("--domain pcie: hwloc cannot read this machine's topology");
    return read_tree(h.topo, "this machine");
}

IoTree load_io_tree_xml(const std::string &path) {
    Hwloc h;
    if (hwloc_topology_set_xml(h.topo, path.c_str()) != 0 || hwloc_topology_load(h.topo) != 0)
        throw RailError("--domain pcie: hwloc cannot read the topology file '" + path + "'");
    return read_tree(h.topo, path);
}

std::vector<DeviceGroup> group_by_pcie(const IoTree &tree, int devices, int rails_per_device,
                                       const std::vector<std::string> &provider_domains) {
    std::vector<std::string> gpu_names, nic_names;
    for (const TreeNode &a : tree.anchors) gpu_names.push_back(a.name);
    for (const TreeNode &n : tree.nics) nic_names.push_back(n.name);
    if (tree.anchors_are_gpus && size_t(devices) > tree.anchors.size())
        throw RailError(fmt::format("--domain pcie: --devices is {} but {} has {} GPU(s) ({})",
                                    devices, tree.source, tree.anchors.size(), join(gpu_names)));
    // The NICs the provider can open, each under the provider's own name.
    struct Nic {
        const TreeNode *node;
        std::string domain;
        int uses = 0;
    };
    std::vector<Nic> nics;
    for (const TreeNode &n : tree.nics)
        for (const std::string &d : provider_domains)
            if (names_nic(d, n.name) &&
                std::none_of(nics.begin(), nics.end(), [&](const Nic &x) { return x.domain == d; })) {
                nics.push_back({&n, d});
                break;
            }
    if (nics.empty())
        throw RailError(fmt::format("--domain pcie: none of the provider's domains ({}) is a NIC in "
                                    "{} (its NICs: {})",
                                    join(provider_domains), tree.source, join(nic_names)));

    std::vector<DeviceGroup> groups(static_cast<size_t>(devices));
    for (int d = 0; d < devices; ++d) {
        groups[size_t(d)].device = d;
        groups[size_t(d)].anchor = tree.anchors[size_t(d) % tree.anchors.size()].name;
    }
    for (int round = 0; round < rails_per_device; ++round)
        for (int d = 0; d < devices; ++d) {
            const TreeNode &anchor = tree.anchors[size_t(d) % tree.anchors.size()];
            Nic *best = nullptr;
            int best_hops = 0;
            for (Nic &n : nics) {
                const int hops = tree_hops(anchor, *n.node);
                if (best == nullptr ||
                    std::tie(n.uses, hops) < std::tie(best->uses, best_hops)) {
                    best = &n;
                    best_hops = hops;
                }
            }
            ++best->uses;
            groups[size_t(d)].domains.push_back(best->domain);
            groups[size_t(d)].hops.push_back(best_hops);
        }
    return groups;
}

std::string domain_list(const std::vector<DeviceGroup> &groups) {
    std::string out;
    for (const DeviceGroup &g : groups)
        for (const std::string &d : g.domains) out += (out.empty() ? "" : ",") + d;
    return out;
}

std::vector<std::string> describe(const std::vector<DeviceGroup> &groups) {
    std::vector<std::string> lines;
    for (const DeviceGroup &g : groups) {
        std::string line = fmt::format("device {} = {}:", g.device, g.anchor);
        for (size_t i = 0; i < g.domains.size(); ++i)
            line += fmt::format("{} {} ({} hops)", i ? "," : "", g.domains[i], g.hops[i]);
        lines.push_back(line);
    }
    return lines;
}

nlohmann::json to_json(const std::vector<DeviceGroup> &groups) {
    nlohmann::json out = nlohmann::json::array();
    for (const DeviceGroup &g : groups)
        out.push_back({{"device", g.device},
                       {"anchor", g.anchor},
                       {"domains", g.domains},
                       {"hops", g.hops}});
    return out;
}

DomainChoice choose_domains(const std::string &domain_flag, int devices, int rails_per_device,
                            const std::vector<std::string> &provider_domains) {
    if (domain_flag != "pcie") return {domain_flag, {}, ""};
    DomainChoice choice;
    const IoTree tree = load_io_tree();
    choice.groups = group_by_pcie(tree, devices, rails_per_device, provider_domains);
    choice.spec = domain_list(choice.groups);
    choice.source = tree.source;
    return choice;
}

void print_groups(std::FILE *out, const DomainChoice &choice) {
    if (choice.groups.empty()) return;
    std::fprintf(out, "PCIe groups (%s):\n", choice.source.c_str());
    for (const std::string &line : describe(choice.groups)) std::fprintf(out, "  %s\n", line.c_str());
    std::fflush(out);
}

}  // namespace deputy::rail
