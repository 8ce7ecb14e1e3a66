#include "common/affinity.h"

#include <hwloc.h>
#include <sched.h>

#include <charconv>
#include <mutex>

#include "common/log.h"

namespace deputy::affinity {
namespace {

// One topology for the process; hwloc topologies are safe to read
// concurrently once loaded.
hwloc_topology_t topology() {
    static hwloc_topology_t topo = [] {
        hwloc_topology_t t;
        hwloc_topology_init(&t);
        hwloc_topology_load(t);
        return t;
    }();
    return topo;
}

bool parse_int(std::string_view s, int *out) {
    if (s.empty()) return false;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && ptr == s.data() + s.size() && *out >= 0;
}

}  // namespace

dp_status_t parse_cpu_list(std::string_view text, std::vector<int> *cpus, std::string *error) {
    cpus->clear();
    if (text.empty()) {
        *error = "empty CPU list";
        return DP_ERR_INVALID;
    }
    // The loop below stops when the text runs out, so a trailing comma would
    // otherwise pass unnoticed; "0,,1" already fails on its empty element.
    if (text.back() == ',') {
        *error = "bad CPU list element '' (expected N or N-M)";
        return DP_ERR_INVALID;
    }
    while (!text.empty()) {
        size_t comma = text.find(',');
        std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        size_t dash = item.find('-');
        int first = 0, last = 0;
        bool ok = dash == std::string_view::npos
                      ? parse_int(item, &first) && (last = first, true)
                      : parse_int(item.substr(0, dash), &first) &&
                            parse_int(item.substr(dash + 1), &last) && first <= last;
        if (!ok) {
            *error = "bad CPU list element '" + std::string(item) + "' (expected N or N-M)";
            return DP_ERR_INVALID;
        }
        for (int cpu = first; cpu <= last; ++cpu) cpus->push_back(cpu);
    }
    return DP_OK;
}

int cpu_count() {
    return hwloc_get_nbobjs_by_type(topology(), HWLOC_OBJ_PU);
}

dp_status_t pin_current_thread(int cpu) {
    hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topology(), unsigned(cpu));
    if (pu == nullptr) {
        DP_LOG_ERROR("cannot pin to CPU {}: this machine has CPUs 0..{}", cpu, cpu_count() - 1);
        return DP_ERR_INVALID;
    }
    if (hwloc_set_cpubind(topology(), pu->cpuset, HWLOC_CPUBIND_THREAD) != 0) {
        DP_LOG_ERROR("cannot pin to CPU {}: hwloc_set_cpubind failed (not in the allowed set?)",
                     cpu);
        return DP_ERR_INVALID;
    }
    return DP_OK;
}

int current_cpu() { return sched_getcpu(); }

}  // namespace deputy::affinity
