#include "agent/pool_populator.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace deputy::agent {
namespace {

// Populated in steps, so that a client that leaves mid-way stops the work
// and pools of all sizes progress side by side.
constexpr size_t kStepBytes = 16 << 20;

}  // namespace

PoolPopulator::PoolPopulator() : event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    thread_ = std::thread([this] { run(); });
}

PoolPopulator::~PoolPopulator() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
}

void PoolPopulator::populate(uint32_t client_id, std::shared_ptr<ClientMemory> memory) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        jobs_.push_back({client_id, std::move(memory)});
    }
    wake_.notify_one();
}

std::vector<uint32_t> PoolPopulator::done() {
    uint64_t count;
    [[maybe_unused]] ssize_t n = ::read(event_.get(), &count, sizeof(count));
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(done_, {});
}

void PoolPopulator::run() {
    // Zeroing a GiB takes a core for about a second: at a lower priority
    // than the engines and the service thread, so that serving attached
    // clients comes first, but not SCHED_IDLE, which a node whose cores all
    // compute would starve (and every attach with it).
    setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 10);
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            if (stopping_) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        // One step per turn, jobs in turn: a client asking for a 1 GiB pool
        // does not hold up one asking for the default behind it.
        auto *base = static_cast<std::byte *>(job.memory->segment.data());
        const size_t size = job.memory->segment.size();
        const size_t len = std::min(kStepBytes, size - job.done);
        // A client that left meanwhile (nobody else holds its memory) is dropped.
        if (job.memory.use_count() > 1) {
            if (madvise(base + job.done, len, MADV_POPULATE_WRITE) != 0) {
                // Kernels before 5.14: touch each page (zero, as it still is).
                for (size_t p = 0; p < len; p += 4096) {
                    auto *byte = reinterpret_cast<volatile std::byte *>(base + job.done + p);
                    *byte = *byte;
                }
            }
            job.done += len;
            if (job.done < size) {
                std::lock_guard<std::mutex> lock(mutex_);
                jobs_.push_back(std::move(job));
                continue;
            }
        }
        job.memory.reset();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_.push_back(job.client_id);
        }
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(event_.get(), &one, sizeof(one));
    }
}

}  // namespace deputy::agent
