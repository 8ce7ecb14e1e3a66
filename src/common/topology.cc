#include "common/topology.h"

#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cstdlib>

namespace deputy {
namespace {

// Owns a loaded hwloc topology.
struct HwlocTopology {
    hwloc_topology_t topo = nullptr;
    ~HwlocTopology() {
        if (topo) hwloc_topology_destroy(topo);
    }
};

// Reads packages, cores and CPUs out of a loaded topology. A machine
// without Package objects is one package; one without Core objects (hwloc
// finds none on some platforms) has one core per CPU.
Topology summarize(hwloc_topology_t topo, std::string source) {
    Topology t;
    t.source = std::move(source);
    t.packages = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
    const bool have_cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0;
    const hwloc_obj_type_t core_type = have_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    const int n = hwloc_get_nbobjs_by_type(topo, core_type);
    for (int i = 0; i < n; ++i) {
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, core_type, unsigned(i));
        TopologyCore c;
        c.logical_index = int(core->logical_index);
        hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, core);
        c.package = package ? int(package->logical_index) : 0;
        hwloc_obj_t pu = nullptr;
        while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(topo, core->cpuset, HWLOC_OBJ_PU,
                                                              pu)) != nullptr) {
            c.cpus.push_back(int(pu->os_index));
            c.cpu_logical_indexes.push_back(int(pu->logical_index));
        }
        if (!c.cpus.empty()) t.cores.push_back(std::move(c));
    }
    // hwloc orders cores by logical index, which goes package by package.
    std::stable_sort(
        t.cores.begin(), t.cores.end(),
        [](const TopologyCore &a, const TopologyCore &b) { return a.package < b.package; });
    return t;
}

std::string plural(int n, const char *word) {
    return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

}  // namespace

int Topology::cpu_count() const {
    int n = 0;
    for (const TopologyCore &c : cores) n += int(c.cpus.size());
    return n;
}

std::vector<int> Topology::all_cpus() const {
    std::vector<int> out;
    for (const TopologyCore &c : cores) out.insert(out.end(), c.cpus.begin(), c.cpus.end());
    std::sort(out.begin(), out.end());
    return out;
}

bool Topology::has_smt() const {
    return std::any_of(cores.begin(), cores.end(),
                       [](const TopologyCore &c) { return c.cpus.size() > 1; });
}

const TopologyCore *Topology::core_of(int cpu) const {
    for (const TopologyCore &c : cores)
        if (std::find(c.cpus.begin(), c.cpus.end(), cpu) != c.cpus.end()) return &c;
    return nullptr;
}

int Topology::cpu_logical_index(int cpu) const {
    for (const TopologyCore &c : cores)
        for (size_t i = 0; i < c.cpus.size(); ++i)
            if (c.cpus[i] == cpu) return c.cpu_logical_indexes[i];
    return -1;
}

std::string Topology::summary() const {
    size_t most = 0;
    for (const TopologyCore &c : cores) most = std::max(most, c.cpus.size());
    const std::string smt = has_smt() ? fmt::format("SMT: {} per core", most) : "no SMT";
    return fmt::format("{}, {}, {}, {}", plural(packages, "package"),
                       plural(int(cores.size()), "core"), plural(cpu_count(), "CPU"), smt);
}

dp_status_t load_synthetic_topology(const std::string &description, Topology *out,
                                    std::string *error) {
    HwlocTopology h;
    if (hwloc_topology_init(&h.topo) != 0) {
        *error = "hwloc_topology_init failed";
        return DP_ERR_INTERNAL;
    }
    if (hwloc_topology_set_synthetic(h.topo, description.c_str()) != 0) {
        *error = fmt::format("'{}' is not an hwloc synthetic topology (e.g. \"package:2 core:4 "
                             "pu:2\")", description);
        return DP_ERR_INVALID;
    }
    if (hwloc_topology_load(h.topo) != 0) {
        *error = fmt::format("hwloc cannot load the synthetic topology '{}'", description);
        return DP_ERR_INVALID;
    }
    *out = summarize(h.topo, description);
    return DP_OK;
}

dp_status_t load_machine_topology(Topology *out, std::string *error) {
    if (const char *synthetic = std::getenv("DEPUTY_TOPOLOGY"); synthetic && *synthetic) {
        if (dp_status_t s = load_synthetic_topology(synthetic, out, error); s != DP_OK) {
            *error = "DEPUTY_TOPOLOGY: " + *error;
            return s;
        }
        out->source = std::string("DEPUTY_TOPOLOGY=") + synthetic;
        return DP_OK;
    }
    HwlocTopology h;
    if (hwloc_topology_init(&h.topo) != 0 || hwloc_topology_load(h.topo) != 0) {
        *error = "hwloc cannot read this machine's topology";
        return DP_ERR_INTERNAL;
    }
    *out = summarize(h.topo, "this machine");
    if (out->cores.empty()) {
        *error = "hwloc found no CPU this process may use";
        return DP_ERR_INTERNAL;
    }
    return DP_OK;
}

}  // namespace deputy
