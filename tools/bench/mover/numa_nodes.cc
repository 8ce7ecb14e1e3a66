#include "bench/mover/numa_nodes.h"

#include <hwloc.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace deputy::bench {
namespace {

// The machine's topology, loaded once (the benchmark binds a few buffers).
hwloc_topology_t topology() {
    static hwloc_topology_t t = [] {
        hwloc_topology_t loaded = nullptr;
        if (hwloc_topology_init(&loaded) != 0 || hwloc_topology_load(loaded) != 0) return loaded;
        return loaded;
    }();
    return t;
}

std::vector<int> numa_nodes() {
    std::vector<int> nodes;
    hwloc_topology_t t = topology();
    if (t == nullptr) return nodes;
    const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i)
        nodes.push_back(int(hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, unsigned(i))->os_index));
    return nodes;
}

}  // namespace

bool parse_buffer_nodes(const std::string &text, BufferNodes *out, std::string *error) {
    std::vector<int> given;
    size_t start = 0;
    for (;;) {
        const size_t comma = text.find(',', start);
        const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos
                                                                                 : comma - start);
        char *end = nullptr;
        const long node = std::strtol(part.c_str(), &end, 10);
        if (part.empty() || *end != '\0' || node < 0 || node > 4095) {
            *error = "-S " + text + ": expected NUMA node numbers SRC,DST[,THIRD] (or one for all)";
            return false;
        }
        given.push_back(int(node));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (given.size() > 3) {
        *error = "-S " + text + ": at most three nodes (source, destination, third buffer)";
        return false;
    }
    const std::vector<int> nodes = numa_nodes();
    for (int node : given) {
        bool found = false;
        for (int n : nodes) found = found || n == node;
        if (!found) {
            std::string list;
            for (int n : nodes) list += (list.empty() ? "" : ", ") + std::to_string(n);
            *error = "-S " + text + ": this machine has no NUMA node " + std::to_string(node) +
                     " (it has " + (nodes.size() == 1 ? "node " : "nodes ") + list + ")";
            return false;
        }
    }
    out->src = given[0];
    out->dst = given.size() > 1 ? given[1] : given[0];
    out->third = given.size() > 2 ? given[2] : given[0];
    return true;
}

bool bind_to_node(void *p, size_t bytes, int node, std::string *error) {
    static std::mutex mutex;  // hwloc's topology is not for concurrent use
    std::lock_guard lock(mutex);
    hwloc_topology_t t = topology();
    hwloc_obj_t obj = t ? hwloc_get_numanode_obj_by_os_index(t, unsigned(node)) : nullptr;
    if (obj == nullptr) {
        *error = "NUMA node " + std::to_string(node) + " is not in this machine's topology";
        return false;
    }
    if (hwloc_set_area_membind(t, p, bytes, obj->nodeset, HWLOC_MEMBIND_BIND,
                               HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT) != 0) {
        *error = "binding a buffer to NUMA node " + std::to_string(node) + ": " +
                 std::strerror(errno);
        return false;
    }
    return true;
}

}  // namespace deputy::bench
