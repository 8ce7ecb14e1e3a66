// Reading a few bytes of a client's memory off the service thread.
//
// `dp_mem_register` proves that cross-memory attach works on the range by
// reading its first and last byte. The client chooses the range, and memory
// it armed with userfaultfd (or backed by a FUSE file it serves) makes that
// read wait for as long as the client likes. So each probe runs on a thread
// of its own; the service thread starts it, goes on serving everybody, and
// answers the request when the result comes back (the client's later
// requests wait in its inbox meanwhile, as behind a staged job). A probe
// left blocked ends when the client's process does: its memory goes, and
// the read fails. One at a time per client (its inbox waits), so one
// process holds at most max_process_clients such threads.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/fd.h"

namespace deputy::agent {

class ClientProcess;

class MemoryProbes {
  public:
    struct Result {
        uint32_t client = 0;
        bool ok = false;
        std::string error;  // the read's, when !ok
    };

    MemoryProbes();
    // Readable when a probe finished (epoll it).
    int event_fd() const;
    // Reads the bytes at `first` and `last` of `process` on a new thread.
    // False (nothing started) when no thread can be had.
    bool start(uint32_t client, std::shared_ptr<const ClientProcess> process, uint64_t first,
               uint64_t last);
    // The probes finished since the last call.
    std::vector<Result> done();

  private:
    // Shared with the probe threads, which may outlive the agent's loop.
    struct Shared {
        std::mutex mutex;
        std::vector<Result> done;
        UniqueFd event;
    };
    std::shared_ptr<Shared> shared_;
};

}  // namespace deputy::agent
