#include "mpi/registered_memory.h"

#include <deputy/status.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

namespace deputy::mpi {
namespace {

struct Range {
    uint64_t end;
    uint32_t pins = 0;
};

std::mutex g_mutex;
std::map<uint64_t, Range> g_registered;  // start -> range, registered at the agent
std::map<uint64_t, uint64_t> g_pool;     // MPI_Alloc_mem: start -> end

// The range starting at or before addr that covers [addr, end), if any.
template <typename Map>
auto covering(Map &map, uint64_t addr, uint64_t end) {
    auto it = map.upper_bound(addr);
    if (it == map.begin()) return map.end();
    --it;
    const uint64_t range_end = [&] {
        if constexpr (std::is_same_v<typename Map::mapped_type, Range>) return it->second.end;
        else return it->second;
    }();
    return end <= range_end ? it : map.end();
}

// The span of contiguous mappings of this process covering [addr, end);
// false if part of it is not mapped.
bool mapping_span(uint64_t addr, uint64_t end, uint64_t *span_start, uint64_t *span_end) {
    FILE *maps = std::fopen("/proc/self/maps", "re");
    if (!maps) return false;
    char line[512];
    bool found = false;
    uint64_t start = 0, stop = 0;
    while (std::fgets(line, sizeof line, maps)) {
        uint64_t lo = 0, hi = 0;
        if (std::sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) != 2) continue;
        if (!found) {
            if (addr < lo || addr >= hi) continue;
            found = true;
            start = lo;
            stop = hi;
        } else if (lo == stop) {
            stop = hi;  // the next mapping continues this one
        } else {
            break;
        }
        if (stop >= end) break;
    }
    std::fclose(maps);
    if (!found || stop < end) return false;
    *span_start = start;
    *span_end = stop;
    return true;
}

void forget_unpinned(dp_context_t *ctx) {
    for (auto it = g_registered.begin(); it != g_registered.end();) {
        if (it->second.pins == 0) {
            dp_mem_deregister(ctx, reinterpret_cast<const void *>(it->first));
            it = g_registered.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace

dp_status_t reach_memory(dp_context_t *ctx, const void *p, size_t bytes, RangePins *pins,
                         std::string *error) {
    if (bytes == 0) return DP_OK;
    // Staged or rdma (an agent on another host): the library copies or
    // exposes every buffer itself.
    if (dp_memory_mode(ctx) != DP_MEMORY_DIRECT) return DP_OK;
    const uint64_t addr = reinterpret_cast<uint64_t>(p);
    const uint64_t end = addr + bytes;
    // The pool and the shared heap (where the malloc interposer puts large
    // buffers): the agent reaches them in place, nothing to register.
    if (dp_mem_mapped(ctx, p, bytes)) return DP_OK;
    std::lock_guard lock(g_mutex);
    if (covering(g_pool, addr, end) != g_pool.end()) return DP_OK;
    auto it = covering(g_registered, addr, end);
    if (it == g_registered.end()) {
        uint64_t start = 0, stop = 0;
        if (!mapping_span(addr, end, &start, &stop)) {
            char text[128];
            std::snprintf(text, sizeof text, "buffer [0x%" PRIx64 ", +%zu) is not mapped memory",
                          addr, bytes);
            *error = text;
            return DP_ERR_DENIED;
        }
        dp_status_t st = dp_mem_register(ctx, reinterpret_cast<const void *>(start), stop - start);
        if (st == DP_ERR_TOO_LARGE) {
            forget_unpinned(ctx);
            st = dp_mem_register(ctx, reinterpret_cast<const void *>(start), stop - start);
        }
        if (st != DP_OK) {
            *error = std::string("registering the buffer's mapping: ") + dp_strerror(st);
            return st;
        }
        // The heap grew past an earlier registration of it: the longer one
        // replaces it here (the agent keeps both), its pins carried over.
        it = g_registered.try_emplace(start, Range{stop}).first;
        it->second.end = std::max(it->second.end, stop);
    }
    ++it->second.pins;
    pins->push_back(it->first);
    return DP_OK;
}

void release_memory(const RangePins &pins) {
    if (pins.empty()) return;
    std::lock_guard lock(g_mutex);
    for (uint64_t start : pins) {
        auto it = g_registered.find(start);
        if (it != g_registered.end() && it->second.pins > 0) --it->second.pins;
    }
}

void note_pool_allocation(const void *p, size_t bytes) {
    const uint64_t addr = reinterpret_cast<uint64_t>(p);
    std::lock_guard lock(g_mutex);
    g_pool[addr] = addr + bytes;
}

bool forget_pool_allocation(const void *p) {
    std::lock_guard lock(g_mutex);
    return g_pool.erase(reinterpret_cast<uint64_t>(p)) > 0;
}

}  // namespace deputy::mpi
