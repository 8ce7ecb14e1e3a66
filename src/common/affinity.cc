#include "common/affinity.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
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

std::string format_cpu_list(std::vector<int> cpus) {
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(cpus[i]);
        if (j > i) out += '-' + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
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

namespace {

// A kernel CPU mask wide enough for `max_cpu` (CPU_ALLOC: machines with
// more than CPU_SETSIZE CPUs exist).
struct CpuMask {
    explicit CpuMask(int max_cpu) : count(std::max(max_cpu + 1, int(CPU_SETSIZE))) {
        set = CPU_ALLOC(size_t(count));
        bytes = CPU_ALLOC_SIZE(size_t(count));
        CPU_ZERO_S(bytes, set);
    }
    ~CpuMask() { CPU_FREE(set); }
    CpuMask(const CpuMask &) = delete;
    CpuMask &operator=(const CpuMask &) = delete;
    int count;
    size_t bytes;
    cpu_set_t *set;
};

}  // namespace

dp_status_t pin_current_thread_to(const std::vector<int> &cpus) {
    if (cpus.empty()) return DP_ERR_INVALID;
    CpuMask mask(*std::max_element(cpus.begin(), cpus.end()));
    for (int cpu : cpus) {
        if (cpu < 0) return DP_ERR_INVALID;
        CPU_SET_S(size_t(cpu), mask.bytes, mask.set);
    }
    if (sched_setaffinity(0, mask.bytes, mask.set) != 0) {
        DP_LOG_ERROR("cannot pin to CPUs {}: {}", format_cpu_list(cpus), std::strerror(errno));
        return DP_ERR_INVALID;
    }
    return DP_OK;
}

std::vector<int> allowed_cpus(pid_t tid) {
    // The kernel's mask may be wider than CPU_SETSIZE: grow until it fits.
    for (int width = CPU_SETSIZE; width <= (1 << 20); width *= 4) {
        CpuMask mask(width - 1);
        if (sched_getaffinity(tid, mask.bytes, mask.set) == 0) {
            std::vector<int> out;
            for (int cpu = 0; cpu < mask.count; ++cpu)
                if (CPU_ISSET_S(size_t(cpu), mask.bytes, mask.set)) out.push_back(cpu);
            return out;
        }
        if (errno != EINVAL) break;
    }
    return {};
}

int current_cpu() { return sched_getcpu(); }

}  // namespace deputy::affinity
