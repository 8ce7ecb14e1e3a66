// With `"pool_pages": "prefault"` (not the default: it commits every pool
// whole, and 128 ranks attaching at once then wait seconds), allocates and
// maps a new client's pool in the agent before the client is told it
// attached, on a thread of its own: the service thread goes on serving
// everyone else meanwhile (a 1 GiB pool takes about a second here).
//
// Why the agent faults the pool in at all, rather than leave the pages to
// the client's first touches: measured here (2 vCPUs, blocking allreduce of
// 256 KiB, 2 ranks, 300 iterations after 30 untimed, 8 runs each,
// alternated), the median was 34-44 us with the pool faulted in by the
// service thread at attach (MAP_POPULATE, as before: it held the service
// thread 39 ms per 64 MiB), 57-68 us with this thread doing it before the
// answer, and 130 us when the client's dp_malloc faulted its pages in. No
// page fault happens in any steady state; why placement at attach matters
// is not understood yet (docs/PERFORMANCE.md). `"pool_pages": "lazy"` (the
// default) leaves the pages to the client, committing memory only as it
// allocates.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/client_space.h"
#include "common/fd.h"

namespace deputy::agent {

class PoolPopulator {
  public:
    PoolPopulator();
    ~PoolPopulator();
    PoolPopulator(const PoolPopulator &) = delete;
    PoolPopulator &operator=(const PoolPopulator &) = delete;

    // Readable (eventfd) while finished jobs wait in done().
    int event_fd() const { return event_.get(); }
    // Faults in the whole segment of `memory`, then reports `client_id`. A
    // client gone meanwhile (nobody else holds its memory) is skipped.
    void populate(uint32_t client_id, std::shared_ptr<ClientMemory> memory);
    // The clients whose pools are ready since the last call.
    std::vector<uint32_t> done();

  private:
    struct Job {
        uint32_t client_id = 0;
        std::shared_ptr<ClientMemory> memory;
        size_t done = 0;  // bytes faulted in so far
    };
    void run();

    UniqueFd event_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> jobs_;
    std::vector<uint32_t> done_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace deputy::agent
