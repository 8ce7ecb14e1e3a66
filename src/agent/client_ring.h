// The agent's end of a client's work queue. The ring lives in the client's
// segment, where the client can write anything at any time, so the agent
// does not use WorkQueue::pop (which follows the shared head and could be
// sent round in circles): it keeps its own head, takes a slot only when its
// sequence says "full at exactly this position", and copies the descriptor
// out before anyone looks at it. A garbage slot can at worst look empty or
// deliver a garbage descriptor, which the mover then refuses field by field.
#pragma once

#include <deputy/mover.h>

#include <cstring>

#include "mover/work_queue.h"

namespace deputy::agent {

class ClientRing {
  public:
    ClientRing() = default;
    // `memory` was formatted by WorkQueue::format(memory, size) by the agent.
    ClientRing(void *memory, uint32_t size)
        : header_(static_cast<mover::WorkQueueHeader *>(memory)),
          slots_(reinterpret_cast<mover::WorkQueueSlot *>(static_cast<char *>(memory) +
                                                          sizeof(mover::WorkQueueHeader))),
          size_(size) {}

    // Copies the next descriptor out and frees its slot; false when empty.
    bool pop(dp_desc_t *out) {
        mover::WorkQueueSlot &slot = slots_[head_ & (size_ - 1)];
        // Acquire pairs with the client's release in WorkQueue::fill.
        if (slot.seq.load(std::memory_order_acquire) != 2 * head_ + 1) return false;
        std::memcpy(out, &slot.desc, sizeof(dp_desc_t));
        // Release: the copy is done before the client may reuse the slot.
        slot.seq.store(2 * (head_ + size_), std::memory_order_release);
        ++head_;
        header_->head.store(head_, std::memory_order_relaxed);  // for the client's information
        return true;
    }

    bool maybe_nonempty() const {
        return slots_[head_ & (size_ - 1)].seq.load(std::memory_order_acquire) == 2 * head_ + 1;
    }
    uint64_t consumed() const { return head_; }

  private:
    mover::WorkQueueHeader *header_ = nullptr;
    mover::WorkQueueSlot *slots_ = nullptr;
    uint64_t size_ = 1;
    uint64_t head_ = 0;
};

}  // namespace deputy::agent
