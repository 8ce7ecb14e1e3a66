#include "fabric/exposed_memory.h"

#include <sodium.h>

namespace deputy::fabric {
namespace {

// How long the progress thread sleeps in fi_cq_sread before it looks at
// `stopping_`: the bound on the destructor's wait.
constexpr int kSleepMs = 50;

}  // namespace

ExposedMemory::ExposedMemory(const std::string &provider, const std::string &peer_host) {
    // Registrations come from the posting threads while the progress
    // thread sleeps in fi_cq_sread: the domain must take calls from both.
    const Catalog catalog = Catalog::query(provider, kRmaReadsAndWrites, FI_THREAD_SAFE);
    const std::optional<sockaddr_storage> route = local_address_towards(peer_host);
    endpoint_ = std::make_unique<Endpoint>(catalog.pick("", route ? &*route : nullptr, 1).front(),
                                           "remote member memory", -1, FI_WAIT_UNSPEC);
    progress_ = std::thread([this] { progress_loop(); });
}

ExposedMemory::~ExposedMemory() {
    stopping_.store(true, std::memory_order_relaxed);
    if (progress_.joinable()) progress_.join();
}

std::unique_ptr<Registration> ExposedMemory::expose(const void *addr, uint64_t bytes,
                                                    uint64_t access) {
    // A key nobody can guess: a peer that learns an address cannot reach
    // memory it was not given (providers that choose keys, FI_MR_PROV_KEY,
    // ignore ours). A collision with a live key is refused by the
    // provider; another draw then succeeds.
    for (int attempt = 0;; ++attempt) {
        uint64_t key = 0;
        randombytes_buf(&key, sizeof(key));
        try {
            return std::make_unique<Registration>(*endpoint_, const_cast<void *>(addr), bytes,
                                                  access, key);
        } catch (const FabricError &) {
            if (attempt == 2) throw;
        }
    }
}

void ExposedMemory::progress_loop() {
    // Nothing completes here (the peer initiates every operation); the
    // call is what moves the provider's bytes in and out of our memory.
    fi_cq_data_entry entry;
    while (!stopping_.load(std::memory_order_relaxed)) {
        const ssize_t n = fi_cq_sread(endpoint_->cq(), &entry, 1, nullptr, kSleepMs);
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            fi_cq_readerr(endpoint_->cq(), &err, 0);
        }
    }
}

}  // namespace deputy::fabric
