// A client's memory as the agent sees it: the window onto its mapped pool,
// the ranges of ordinary memory it registered (memory mode "direct"), and
// how an engine runs a descriptor that touches them.
//
// The engines run every descriptor of the client, whatever memory it names:
// pool addresses translate in place; a descriptor touching a registered
// range runs on bounce buffers filled and written back through the
// client's verified process (client_process.h), still on the engine. The
// service thread never moves a client's bytes.
//
// Lifetime: ClientMemory (segment + space) is shared. The session, every
// collective running over its buffers and the device slot of a retiring
// client each hold a reference; the mapping goes away with the last one,
// so nothing unmaps memory an engine is using.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "agent/client_process.h"
#include "common/log_limiter.h"
#include "common/segment.h"
#include "mover/address_space.h"
#include "mover/execute.h"

namespace deputy::agent {

struct DirectRange {
    uint64_t addr;
    uint64_t len;
};

class ClientSpace final : public mover::AddressSpace {
  public:
    ClientSpace(uint32_t client_id, std::byte *agent_pool, uint64_t pool_bytes,
                std::shared_ptr<const ClientProcess> process, uint64_t max_direct_bytes);

    uint32_t client_id() const { return client_id_; }
    const ClientProcess &process() const { return *process_; }
    // Warnings this client causes, rate-limited (service thread and engines).
    LogLimiter &log() const { return log_; }

    // --- the pool ---
    // The client's address of its pool's first byte (0: not told yet). The
    // client tells it (REGISTER "segment base"); a lie only moves the window
    // over the client's own pool, never outside it.
    void set_client_pool(uint64_t address) {
        client_pool_.store(address, std::memory_order_release);
    }
    uint64_t client_pool() const { return client_pool_.load(std::memory_order_acquire); }
    uint64_t pool_bytes() const { return pool_bytes_; }
    // Pool and shared-heap addresses only; everything else is refused.
    void *translate(uint64_t addr, uint64_t len, mover::Access access) const override;
    bool in_pool(uint64_t addr, uint64_t len) const {
        return translate(addr, len, mover::Access::read) != nullptr;
    }

    // --- the shared heap (include/deputy/heap.h), set once ---
    // The client maps it at `address`; we at `agent_heap`, `bytes` long.
    // The mapping must outlive this object's users (ClientMemory holds it).
    bool has_heap() const { return client_heap_.load(std::memory_order_acquire) != 0; }
    uint64_t client_heap() const { return client_heap_.load(std::memory_order_acquire); }
    uint64_t heap_bytes() const { return heap_bytes_; }  // (once has_heap())
    void set_heap(uint64_t address, std::byte *agent_heap, uint64_t bytes) {
        agent_heap_ = agent_heap;
        heap_bytes_ = bytes;
        client_heap_.store(address, std::memory_order_release);
    }

    // --- registered ranges (the service thread changes them; engines read) ---
    void add_range(uint64_t addr, uint64_t len);
    bool remove_range(uint64_t addr);
    size_t range_count() const { return range_count_.load(std::memory_order_acquire); }
    // [addr, +len) inside one registered range.
    bool direct_allows(uint64_t addr, uint64_t len) const;

    // --- engines ---
    bool run(const dp_desc_t &desc, const mover::ExecLimits &limits,
             mover::OpResult *result) const override;
    void report_lost(const dp_desc_t &desc, const char *queue) const override;
    // Descriptors that touched registered memory (ran on bounce buffers).
    uint64_t bounced() const { return bounced_.load(std::memory_order_relaxed); }

    // Fairness between clients: the service thread hands a client's
    // descriptors to the (shared) device queue only while the client has
    // less than a budget with the engines, so one client's flood cannot
    // queue the others behind all of it. A client with nothing in flight
    // always gets one descriptor through, whatever its size.
    bool may_submit() const {
        const uint32_t n = inflight_.load(std::memory_order_relaxed);
        return n == 0 || (n < kMaxInflight &&
                          inflight_bytes_.load(std::memory_order_relaxed) < kMaxInflightBytes);
    }
    void submitted(const dp_desc_t &desc) {
        inflight_.fetch_add(1, std::memory_order_relaxed);
        inflight_bytes_.fetch_add(cost(desc), std::memory_order_relaxed);
    }
    void finished(const dp_desc_t &desc) const override {
        inflight_bytes_.fetch_sub(cost(desc), std::memory_order_relaxed);
        inflight_.fetch_sub(1, std::memory_order_release);
    }
    // Nothing of this client's is with the engines (acquire: pairs with
    // finished(), so its descriptors' writes are visible).
    bool quiet() const { return inflight_.load(std::memory_order_acquire) == 0; }
    // The service thread submits a client's DRAIN only once quiet(): an
    // engine completes it without waiting for the shared queue.
    bool orders_own_drains() const override { return true; }
    static constexpr uint32_t kMaxInflight = 64;
    static constexpr uint64_t kMaxInflightBytes = 16ull << 20;

    // --- collectives: one buffer of a member, from any thread ---
    // In the pool: in place. In a registered range: through the process.
    // False with *why otherwise (or when the process faults or is gone).
    bool read(uint64_t addr, void *out, uint64_t len, std::string *why) const;
    bool write(uint64_t addr, const void *in, uint64_t len, std::string *why) const;
    // The one way a completion record reaches a client: in its pool, in
    // place (waking a block-mode waiter); in a registered range, written
    // back with the status byte last. A batch's member records too, after
    // their member's data when that ran on bounce buffers. False when
    // `record` is misaligned or in neither (nothing is written then).
    bool publish(uint64_t record, const mover::OpResult &result, uint64_t user) const;
    // The same for a record in the pool or shared heap only (the service
    // thread's: it never calls into a client's process). False otherwise.
    bool publish_in_place(uint64_t record, const mover::OpResult &result, uint64_t user) const;

  private:
    // What a descriptor counts against the budget: its bytes. A batch's
    // members' sizes are in the client's memory, which it may rewrite after
    // we looked: each member counts as 1 MiB, so a 16-member batch has the
    // client's whole share to itself.
    static uint64_t cost(const dp_desc_t &d) {
        return d.opcode == DP_OP_BATCH ? d.size * (1ull << 20) : d.size;
    }
    bool touches_direct(uint64_t addr) const;
    bool needs_bounce(const dp_desc_t &desc) const;
    bool run_bounced(const dp_desc_t &desc, const mover::ExecLimits &limits,
                     mover::OpResult *result) const;

    uint32_t client_id_;
    std::byte *agent_pool_;
    uint64_t pool_bytes_;
    std::atomic<uint64_t> client_pool_{0};
    std::byte *agent_heap_ = nullptr;  // written before client_heap_ (release)
    uint64_t heap_bytes_ = 0;
    std::atomic<uint64_t> client_heap_{0};
    std::shared_ptr<const ClientProcess> process_;
    uint64_t max_direct_bytes_;
    mutable std::shared_mutex ranges_mutex_;
    std::vector<DirectRange> ranges_;
    std::atomic<size_t> range_count_{0};
    mutable std::atomic<uint64_t> bounced_{0};
    mutable std::atomic<uint32_t> inflight_{0};
    mutable std::atomic<uint64_t> inflight_bytes_{0};
    mutable LogLimiter log_;
};

// What a client's memory is made of, shared by whoever may still touch it.
struct ClientMemory {
    ClientMemory(Segment segment_in, uint32_t client_id, uint64_t pool_offset, uint64_t pool_bytes,
                 std::shared_ptr<const ClientProcess> process, uint64_t max_direct_bytes)
        : segment(std::move(segment_in)),
          space(client_id, segment.at(pool_offset), pool_bytes, std::move(process),
                max_direct_bytes) {}
    Segment segment;
    ClientSpace space;
    Segment heap;  // the client's shared heap, once it shared one
};

}  // namespace deputy::agent
