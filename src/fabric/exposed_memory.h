// The target side of RMA: memory of this process that one peer may read
// or write through a provider, range by range, key by key (a remote team
// member's buffers, read and written by its team proxy: memory mode rdma).
//
// Each range is registered for one operation with exactly the access it
// needs (FI_REMOTE_READ for sources, FI_REMOTE_WRITE for results) under a
// fresh random key, and revoked (closed) when the operation ends; closing
// the whole object revokes every key. The provider checks every access
// against the ranges and keys: nothing outside them is reached. A thread
// of its own drives the provider's progress (the tcp provider's target
// side moves bytes only while someone polls its completion queue),
// sleeping in fi_cq_sread while nothing arrives.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fabric/fabric.h"

namespace deputy::fabric {

class ExposedMemory {
  public:
    // On the provider's domain whose interface routes to `peer_host` (the
    // agent's host; the first domain when that is unknown). Throws
    // FabricError (the provider missing, or its objects failing).
    ExposedMemory(const std::string &provider, const std::string &peer_host);
    ~ExposedMemory();  // stops the progress thread, closes the endpoint
    ExposedMemory(const ExposedMemory &) = delete;
    ExposedMemory &operator=(const ExposedMemory &) = delete;

    // What the peer inserts into its address vector.
    std::vector<uint8_t> address() const { return endpoint_->address(); }
    std::string provider_name() const { return endpoint_->provider_name(); }

    // [addr, addr + bytes) for `access` (FI_REMOTE_READ or FI_REMOTE_WRITE)
    // under a fresh random key; the registration's key() and remote_base()
    // are what the peer needs. Throws FabricError. Any thread.
    std::unique_ptr<Registration> expose(const void *addr, uint64_t bytes, uint64_t access);

  private:
    void progress_loop();

    std::unique_ptr<Endpoint> endpoint_;
    std::atomic<bool> stopping_{false};
    std::thread progress_;
};

}  // namespace deputy::fabric
