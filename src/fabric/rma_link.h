// One initiator of RMA reads and writes towards one peer's registered
// memory: a team proxy's link to its remote member (memory mode rdma).
//
// The proxy reads a member's source bytes straight out of the member's
// memory into its block and writes the results straight back, so bytes
// cross the wire once each way and the member's CPU copies nothing (the
// GVMI idea). Every transfer is synchronous: it posts its pieces, drives
// the provider's progress until all completed, and only then returns, so
// the local memory a transfer names is free to reuse or release the moment
// it returns. A write returns once the bytes are delivered into the
// peer's memory (FI_DELIVERY_COMPLETE), so an answer sent afterwards on
// another connection never overtakes them.
//
// The peer is not trusted: a key or range it did not register fails that
// transfer with the provider's error (nothing is touched; the tcp provider
// also drops the connection), and a peer that stops answering fails it at
// the deadline. Either way the link is broken: every later transfer fails
// at once, and after a deadline (operations may still be queued on the
// endpoint) local memory a transfer named may be touched until the link
// is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fabric/fabric.h"

namespace deputy::fabric {

class RmaLink {
  public:
    // One piece of a transfer: `bytes` at `local`, and at `remote` (the
    // address the peer's registration gave for its byte 0, plus an offset)
    // under `key`.
    struct Piece {
        void *local = nullptr;
        uint64_t bytes = 0;
        uint64_t remote = 0;
        uint64_t key = 0;
    };

    // Opens an endpoint of `provider` that reads and writes remote memory,
    // on the domain whose interface routes to `peer_host`, and inserts the
    // peer's address. Throws FabricError.
    RmaLink(const std::string &provider, const std::vector<uint8_t> &peer_address,
            const std::string &peer_name, const std::string &peer_host);
    ~RmaLink();
    RmaLink(const RmaLink &) = delete;
    RmaLink &operator=(const RmaLink &) = delete;

    // "" when every piece was read (write: delivered) before `deadline_ns`
    // (timing::now_ns clock); else why not. Any thread: transfers take turns.
    std::string read(const std::vector<Piece> &pieces, uint64_t deadline_ns);
    std::string write(const std::vector<Piece> &pieces, uint64_t deadline_ns);

    bool broken() const { return broken_; }
    std::string provider_name() const { return endpoint_->provider_name(); }
    // The endpoint's address format (FI_SOCKADDR_IN, ...), to check a peer's.
    uint32_t address_format() const { return endpoint_->info()->addr_format; }

  private:
    std::string transfer(bool read, const std::vector<Piece> &pieces, uint64_t deadline_ns);

    std::unique_ptr<Endpoint> endpoint_;
    fi_addr_t peer_ = FI_ADDR_UNSPEC;
    std::mutex mutex_;
    uint64_t next_local_key_ = 1;  // FI_MR_LOCAL providers' registrations; under mutex_
    bool broken_ = false;          // under mutex_
};

// The largest single RMA operation a transfer posts: larger pieces go in
// several, so no provider's max_msg_size and no one operation holds the
// wire for long.
inline constexpr uint64_t kRmaOpBytes = 4ull << 20;

}  // namespace deputy::fabric
