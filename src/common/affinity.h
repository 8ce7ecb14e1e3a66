// CPU affinity through hwloc: parse CPU lists and pin threads.
#pragma once

#include <deputy/status.h>

#include <string>
#include <string_view>
#include <vector>

namespace deputy::affinity {

// Parses "0,2-3,5" into {0,2,3,5}. On error returns DP_ERR_INVALID and puts a
// message naming the bad element in *error.
dp_status_t parse_cpu_list(std::string_view text, std::vector<int> *cpus, std::string *error);

// Number of processing units hwloc sees (logical CPUs).
int cpu_count();

// Pins the calling thread to one logical CPU (hwloc's OS index). Returns
// DP_ERR_INVALID for a CPU that does not exist or is not allowed.
dp_status_t pin_current_thread(int cpu);

// The logical CPU the calling thread runs on now, or -1.
int current_cpu();

}  // namespace deputy::affinity
