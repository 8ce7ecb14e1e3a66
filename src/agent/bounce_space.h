// Executing a descriptor on bytes the agent cannot address directly: the
// client's ordinary memory (memory mode "direct", read and written with
// process_vm_readv/writev) or bytes that came over the channel (mode
// "staged"). The mover asks this space for each range before it runs; the
// space hands out an agent-side buffer filled with the range's current bytes,
// and remembers the ranges the mover may write so the caller can copy them
// back after a successful execution. Pool addresses still translate in
// place, but for completion records. Single-threaded: one BounceSpace per descriptor, on the engine
// that runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/scratch.h"
#include "mover/address_space.h"

namespace deputy::agent {

class BounceSpace final : public mover::AddressSpace {
  public:
    // May the mover touch [addr, +len)? (registered ranges, or anything in staged mode)
    using Allowed = std::function<bool(uint64_t addr, uint64_t len)>;
    // Fills dst with the client's bytes of [addr, +len); false if it cannot.
    // `for_write`: the range is a destination (staged mode may zero-fill it).
    using Fetch = std::function<bool(uint64_t addr, uint64_t len, bool for_write, void *dst)>;

    struct Bounce {
        uint64_t addr;
        bool written;
        bool record;  // a completion record (a batch member's): written back last
        scratch::Buffer bytes;  // the engine's reusable memory (common/scratch.h)
    };

    BounceSpace(const mover::AddressSpace *in_place, Allowed allowed, Fetch fetch,
                uint64_t max_bytes)
        : in_place_(in_place), allowed_(std::move(allowed)), fetch_(std::move(fetch)),
          max_bytes_(max_bytes) {}

    void *translate(uint64_t addr, uint64_t len, mover::Access access) const override;

    // Every range handed out, in order.
    const std::vector<std::unique_ptr<Bounce>> &bounces() const { return bounces_; }
    // The written ranges in the order to copy them back: as the kernel asked
    // for them, except that a batch member's completion record (bounced
    // even in the pool: Access::record) comes after the data of its member,
    // which the kernel asked for after the record. The caller publishes a
    // record through ClientSpace::publish, so none says done too early.
    std::vector<const Bounce *> write_back_order() const;
    // Why the last refusal happened, for the log ("" when none).
    const std::string &refusal() const { return refusal_; }

  private:
    const mover::AddressSpace *in_place_;
    Allowed allowed_;
    Fetch fetch_;
    uint64_t max_bytes_;
    mutable uint64_t used_bytes_ = 0;
    mutable std::vector<std::unique_ptr<Bounce>> bounces_;
    mutable std::string refusal_;
    mutable uint8_t zero_length_target_ = 0;  // what a 0-byte range points at
};

}  // namespace deputy::agent
