#include "agent/memory_probe.h"

#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <system_error>
#include <thread>
#include <utility>

#include "agent/client_process.h"

namespace deputy::agent {

MemoryProbes::MemoryProbes() : shared_(std::make_shared<Shared>()) {
    shared_->event.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
}

int MemoryProbes::event_fd() const { return shared_->event.get(); }

bool MemoryProbes::start(uint32_t client, pid_t pid, std::shared_ptr<const ClientProcess> process,
                         std::vector<Read> reads, std::string *why) {
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (shared_->running >= kMaxProbes) {
            *why = fmt::format("{} reads of client memory are waiting already (at most {})",
                               shared_->running, kMaxProbes);
            return false;
        }
        if (shared_->running_of[pid] >= kMaxProbesPerProcess) {
            *why = fmt::format("process {} has {} reads of its memory waiting already (at most {})",
                               pid, shared_->running_of[pid], kMaxProbesPerProcess);
            return false;
        }
        ++shared_->running;
        ++shared_->running_of[pid];
    }
    auto probe = [shared = shared_, client, pid, process = std::move(process),
                  reads = std::move(reads)] {
        Result r{client, true, {}, {}};
        for (const Read &read : reads) {
            const size_t at = r.bytes.size();
            r.bytes.resize(at + read.len);
            if (!(r.ok = process->read(read.addr, r.bytes.data() + at, read.len, &r.error))) break;
        }
        if (!r.ok) r.bytes.clear();
        std::lock_guard<std::mutex> lock(shared->mutex);
        --shared->running;
        if (--shared->running_of[pid] == 0) shared->running_of.erase(pid);
        shared->done.push_back(std::move(r));
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = write(shared->event.get(), &one, sizeof one);
    };
    try {
        std::thread(std::move(probe)).detach();
    } catch (const std::system_error &e) {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        --shared_->running;
        if (--shared_->running_of[pid] == 0) shared_->running_of.erase(pid);
        *why = fmt::format("no thread for the read ({})", e.what());
        return false;
    }
    return true;
}

std::vector<MemoryProbes::Result> MemoryProbes::done() {
    uint64_t count;
    [[maybe_unused]] ssize_t n = read(shared_->event.get(), &count, sizeof count);
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return std::exchange(shared_->done, {});
}

}  // namespace deputy::agent
