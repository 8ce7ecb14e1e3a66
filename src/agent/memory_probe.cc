#include "agent/memory_probe.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <system_error>
#include <thread>

#include "agent/client_process.h"

namespace deputy::agent {

MemoryProbes::MemoryProbes() : shared_(std::make_shared<Shared>()) {
    shared_->event.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
}

int MemoryProbes::event_fd() const { return shared_->event.get(); }

bool MemoryProbes::start(uint32_t client, std::shared_ptr<const ClientProcess> process,
                         uint64_t first, uint64_t last) {
    try {
        std::thread([shared = shared_, client, process = std::move(process), first, last] {
            Result r{client, true, {}};
            uint8_t byte;
            r.ok = process->read(first, &byte, 1, &r.error) && process->read(last, &byte, 1, &r.error);
            std::lock_guard<std::mutex> lock(shared->mutex);
            shared->done.push_back(std::move(r));
            const uint64_t one = 1;
            [[maybe_unused]] ssize_t n = write(shared->event.get(), &one, sizeof one);
        }).detach();
    } catch (const std::system_error &) {
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
