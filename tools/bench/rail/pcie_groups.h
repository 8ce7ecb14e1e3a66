// `--domain pcie`: each device's rails on the NICs nearest to it in the PCIe
// tree, as the multi-rail article groups each GPU's NICs (the NICs behind
// the GPU's own PCIe switch first, then those of its host bridge, then the
// rest). hwloc reads the tree; grouping is a pure function of it, so tests
// run it on hand-written topologies.
//
// A device stands for a GPU when the machine has GPUs (PCI class 3D
// controller 0x0302, display 0x0380, processing accelerator 0x12xx, or a
// device with an hwloc co-processor OS device such as CUDA's), device d
// being the d-th in hwloc's order; VGA controllers (0x0300, a server's BMC
// graphics) are not counted. Without GPUs a device stands for host memory
// of a package, devices round-robin over the packages. A NIC is an hwloc
// network or OpenFabrics OS device whose name is one of the provider's
// domains ("mlx5_0" for verbs, "eth0" for tcp) or their prefix before a '-'
// ("rdmap0s6" for efa's "rdmap0s6-rdm").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace deputy::rail {

// One object of the tree: its name for reports and its path of hwloc
// gp_indexes from the root, which is all distances need.
struct TreeNode {
    std::string name;             // "GPU 0000:41:00.0 (card1)", "package 1", "mlx5_0"
    std::vector<uint64_t> path;   // root first, the object itself last
};

struct IoTree {
    std::vector<TreeNode> anchors;  // GPUs, else packages, in hwloc's order
    bool anchors_are_gpus = false;
    std::vector<TreeNode> nics;     // every network and OpenFabrics OS device
    std::string source;             // "this machine" or "HWLOC_XMLFILE=..."
};

// Edges between two objects through their deepest common ancestor.
int tree_hops(const TreeNode &a, const TreeNode &b);

// This machine's tree (hwloc honours HWLOC_XMLFILE, to plan for another
// machine); load_io_tree_xml reads a file. Throw RailError naming hwloc's
// failure or the file.
IoTree load_io_tree();
IoTree load_io_tree_xml(const std::string &path);

struct DeviceGroup {
    int device = 0;
    std::string anchor;                // the GPU or package it stands for
    std::vector<std::string> domains;  // one per rail of the device, in rail order
    std::vector<int> hops;             // each domain's distance to the anchor
};

// Rail r of device d = r / rails_per_device takes groups[d].domains[r %
// rails_per_device]. Rails are dealt in rounds, each device in turn taking
// its nearest unused NIC (ties in hwloc's order), so that one device never
// takes a NIC that is as near to the next; when every NIC is in use, the
// next round may reuse them, nearest first. Throws RailError when the tree
// has fewer GPUs than `devices`, or no NIC among `provider_domains`
// (naming both lists).
std::vector<DeviceGroup> group_by_pcie(const IoTree &tree, int devices, int rails_per_device,
                                       const std::vector<std::string> &provider_domains);

// The comma list of one domain per rail that Catalog::pick takes.
std::string domain_list(const std::vector<DeviceGroup> &groups);
// "device 0 = GPU 0000:41:00.0 (card1): mlx5_2 (2 hops), mlx5_3 (2 hops)", one per device.
std::vector<std::string> describe(const std::vector<DeviceGroup> &groups);
nlohmann::json to_json(const std::vector<DeviceGroup> &groups);

// What --domain asks for, resolved for Catalog::pick: the flag as given, or
// for "pcie" this machine's groups and their comma list.
struct DomainChoice {
    std::string spec;
    std::vector<DeviceGroup> groups;  // empty unless --domain pcie
    std::string source;               // the tree's source, for --domain pcie
};
DomainChoice choose_domains(const std::string &domain_flag, int devices, int rails_per_device,
                            const std::vector<std::string> &provider_domains);

// "PCIe groups (this machine):" and describe()'s lines under it; nothing
// when the choice has no groups.
void print_groups(std::FILE *out, const DomainChoice &choice);

}  // namespace deputy::rail
