// A client's mapped pool as the mover sees it: the client's addresses inside
// its pool translate to the agent's mapping of the same pages; every other
// address is refused. The client tells the agent where it mapped the segment
// (REGISTER kind "segment base"); a lie only moves the window over the
// client's own pool, never outside it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "mover/address_space.h"

namespace deputy::agent {

class PoolSpace final : public mover::AddressSpace {
  public:
    PoolSpace(std::byte *agent_pool, uint64_t pool_bytes)
        : agent_pool_(agent_pool), pool_bytes_(pool_bytes) {}

    // The client's address of the pool's first byte (0: not told yet).
    void set_client_pool(uint64_t address) { client_pool_.store(address, std::memory_order_release); }
    uint64_t client_pool() const { return client_pool_.load(std::memory_order_acquire); }

    void *translate(uint64_t addr, uint64_t len, mover::Access) const override {
        const uint64_t base = client_pool();
        if (base == 0 || addr < base) return nullptr;
        const uint64_t offset = addr - base;
        if (offset > pool_bytes_ || len > pool_bytes_ - offset) return nullptr;
        if (len == 0 && offset == pool_bytes_) return nullptr;
        return agent_pool_ + offset;
    }

    // True when [addr, +len) lies in the pool.
    bool contains(uint64_t addr, uint64_t len) const {
        return translate(addr, len, mover::Access::read) != nullptr;
    }

  private:
    std::byte *agent_pool_;
    uint64_t pool_bytes_;
    std::atomic<uint64_t> client_pool_{0};
};

}  // namespace deputy::agent
