// Reading a few bytes of a client's memory off the service thread.
//
// Two requests make the agent read memory the client names: ATTACH, whose
// identity proof (32 bytes) is read back where SO_PEERPIDFD is missing
// (client_process.h), and REGISTER, whose range's first and last bytes are
// read to prove cross-memory attach works there. The client chooses the
// addresses, and memory it armed with userfaultfd (or backed by a FUSE
// file it serves) makes such a read wait for as long as it likes. So each
// probe runs on a thread of its own; the service thread starts it, goes on
// serving everybody, and finishes the request when the result comes back
// (the client's later requests wait in its inbox meanwhile, as behind a
// staged job; a connection still attaching is dropped at attach_timeout_ms
// as any other). A probe left blocked ends when the client's process does:
// its memory goes, and the read fails. At most kMaxProbes run at once, and
// kMaxProbesPerProcess for one process; beyond, start() refuses and the
// request is answered DP_ERR_RETRY.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/fd.h"

namespace deputy::agent {

class ClientProcess;

class MemoryProbes {
  public:
    static constexpr uint32_t kMaxProbes = 64;
    static constexpr uint32_t kMaxProbesPerProcess = 8;

    struct Read {
        uint64_t addr = 0;
        uint32_t len = 0;
    };
    struct Result {
        uint32_t client = 0;
        bool ok = false;
        std::vector<uint8_t> bytes;  // every read's, in order, when ok
        std::string error;           // the failed read's, when !ok
    };

    MemoryProbes();
    // Readable when a probe finished (epoll it).
    int event_fd() const;
    // Runs `reads` of `process` (pid `pid`) on a new thread. False (nothing
    // started, *why says which limit) when too many run already or no
    // thread can be had.
    bool start(uint32_t client, pid_t pid, std::shared_ptr<const ClientProcess> process,
               std::vector<Read> reads, std::string *why);
    // The probes finished since the last call.
    std::vector<Result> done();

  private:
    // Shared with the probe threads, which may outlive the agent's loop.
    struct Shared {
        std::mutex mutex;
        std::vector<Result> done;
        UniqueFd event;
        uint32_t running = 0;
        std::map<pid_t, uint32_t> running_of;
    };
    std::shared_ptr<Shared> shared_;
};

}  // namespace deputy::agent
