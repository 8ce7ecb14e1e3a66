// CPU affinity through hwloc: parse CPU lists and pin threads.
#pragma once

#include <deputy/status.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace deputy::affinity {

// Parses "0,2-3,5" into {0,2,3,5}. On error returns DP_ERR_INVALID and puts a
// message naming the bad element in *error.
dp_status_t parse_cpu_list(std::string_view text, std::vector<int> *cpus, std::string *error);

// The inverse: {5,0,1,2,7,8,2} -> "0-2,5,7-8" (ascending, each CPU once);
// "" for none.
std::string format_cpu_list(std::vector<int> cpus);

// Number of processing units hwloc sees (logical CPUs).
int cpu_count();

// Pins the calling thread to one logical CPU (hwloc's OS index). Returns
// DP_ERR_INVALID for a CPU that does not exist or is not allowed.
dp_status_t pin_current_thread(int cpu);

// Lets the calling thread run on `cpus` (OS indexes) only; threads it
// starts afterwards inherit the set. DP_ERR_INVALID when the kernel refuses
// it (a CPU that does not exist or is not allowed).
dp_status_t pin_current_thread_to(const std::vector<int> &cpus);

// The CPUs thread or process `tid` may run on (sched_getaffinity; 0 = the
// caller), ascending; empty when it cannot be read (the thread is gone).
std::vector<int> allowed_cpus(pid_t tid);

// The logical CPU the calling thread runs on now, or -1.
int current_cpu();

}  // namespace deputy::affinity
