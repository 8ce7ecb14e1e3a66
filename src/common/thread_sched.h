// What the scheduler says about one thread (Linux /proc): how long it ran,
// how long it was runnable but waited for a CPU, and where it last ran.
// `deputy info` shows these for the agent's threads: a thread that waits
// about as long as it runs shares its CPUs with other busy threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace deputy {

struct ThreadSched {
    uint64_t on_cpu_ns = 0;     // busy: time it ran (schedstat field 1)
    uint64_t run_wait_ns = 0;   // runnable, waiting on a run queue (schedstat field 2)
    uint64_t timeslices = 0;    // times it was given a CPU (schedstat field 3)
    int last_cpu = -1;          // the CPU it last ran on (stat field 39)
    std::vector<int> allowed_cpus;  // its affinity (sched_getaffinity)
};

// Reads thread `tid` of process `pid`. False when the thread is gone or the
// kernel has no schedstat (CONFIG_SCHED_INFO off); *out is then partial.
bool read_thread_sched(pid_t pid, pid_t tid, ThreadSched *out);

// The calling thread's id (gettid).
pid_t current_tid();

}  // namespace deputy
