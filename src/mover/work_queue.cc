#include "mover/work_queue.h"

#include <new>

namespace deputy::mover {

WorkQueue WorkQueue::format(void *memory, uint32_t size) {
    auto *header = new (memory) WorkQueueHeader;
    header->tail.store(0, std::memory_order_relaxed);
    header->head.store(0, std::memory_order_relaxed);
    header->size = size;
    header->mask = size - 1;
    auto *slots = reinterpret_cast<WorkQueueSlot *>(static_cast<char *>(memory) +
                                                    sizeof(WorkQueueHeader));
    for (uint32_t i = 0; i < size; ++i) {
        auto *slot = new (&slots[i]) WorkQueueSlot;
        slot->seq.store(2 * uint64_t(i), std::memory_order_relaxed);  // free for position i
        slot->pasid = 0;
    }
    // Publishing the formatted ring to other threads is the caller's job
    // (thread start or a release store of the ring's address).
    return WorkQueue(memory);
}

}  // namespace deputy::mover
