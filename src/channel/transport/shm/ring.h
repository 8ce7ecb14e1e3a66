// A single-producer single-consumer byte ring in shared memory: the data
// path of the shm transport, one ring per direction. Frames (message.h
// header + payload, padded to 8 bytes) are written in order; a frame larger
// than the free space streams through in pieces, so any message fits any
// ring of at least 64 bytes.
//
// Memory ordering (liburing style: each release names its acquire):
//  (1) producer: copy bytes, then store tail (release)
//      consumer: load tail (acquire), then read the bytes below it.
//  (2) consumer: copy bytes out, then store head (release)
//      producer: load head (acquire), then overwrite the bytes below it.
//  (3) the doorbell (Dekker): producer stores tail then loads data_waiting,
//      consumer stores data_waiting then loads tail, all seq_cst, so at least
//      one of them sees the other's store: either the consumer sees the new
//      tail and does not sleep, or the producer sees the waiter and wakes it.
//      The same pair guards the space doorbell (head / space_waiting).
//  (3') the cheap form of (3), used when both processes have registered for
//      membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED): the publisher does a
//      release store and then, in program order, a plain load of the waiting
//      flag; the side going to sleep stores its flag and calls membarrier(),
//      which runs a full barrier on every CPU running the publisher. Wherever
//      that barrier falls in the publisher's store-then-load, either the
//      sleeper sees the new index or the publisher sees the flag. This moves
//      the cost of the StoreLoad fence from every message (an xchg that must
//      wait for the message's cache-line transfers) to every sleep (a
//      syscall that is cheap next to the futex wait it precedes).
// Each side keeps its own index (tail for the producer, head for the
// consumer) in private memory and only publishes it: a peer that scribbles
// on the shared copy cannot move our index. What we read of the peer's index
// is checked (never more than `capacity` ahead or behind), so a corrupt or
// hostile peer is an error, not an out-of-bounds copy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cpu_relax.h"
#include "common/futex.h"

namespace deputy::channel::shm {

// 128 bytes apart: x86 prefetches cache lines in pairs, so 64-byte spacing
// would still let producer and consumer fields share a prefetch unit.
inline constexpr size_t kSlotBytes = 128;

// The shared control words of one ring. Lives in the segment; every field is
// accessed through std::atomic_ref.
struct RingControl {
    alignas(kSlotBytes) uint64_t tail;  // bytes ever written; producer stores
    alignas(kSlotBytes) uint64_t head;  // bytes ever consumed; consumer stores
    // Consumer sleeps on data_seq after setting data_waiting.
    alignas(kSlotBytes) uint32_t data_seq;
    uint32_t data_waiting;
    // Producer sleeps on space_seq after setting space_waiting (ring full).
    alignas(kSlotBytes) uint32_t space_seq;
    uint32_t space_waiting;
};
static_assert(sizeof(RingControl) == 4 * kSlotBytes);

// Registers this process once for the asymmetric doorbell (3'). False when
// the kernel lacks MEMBARRIER_CMD_GLOBAL_EXPEDITED: then (3) is used.
inline bool asymmetric_doorbell_available() {
    static const bool ok = [] {
        long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
               syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
    }();
    return ok;
}

// The sleeper's half of (3'): a full barrier on every CPU that runs a
// registered process (ours included).
inline void heavy_fence() {
    syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
}

template <typename T>
inline std::atomic_ref<T> shared(T &word) {
    return std::atomic_ref<T>(word);
}

// Wakes whoever sleeps on `seq` (at most one thread per word in a channel;
// all of them, to be safe when a shutdown rings every bell).
inline void ring_bell(uint32_t &seq) {
    // release: pairs with the sleeper's acquire load of seq before it waits;
    // the change of value is what makes a racing FUTEX_WAIT return at once.
    shared(seq).fetch_add(1, std::memory_order_release);
    futex_wake(&seq, INT32_MAX);
}

// The producer's view of a ring.
class RingWriter {
  public:
    RingWriter() = default;
    RingWriter(RingControl *control, uint8_t *data, uint64_t capacity)
        : c_(control), data_(data), mask_(capacity - 1), capacity_(capacity) {}

    uint64_t capacity() const { return capacity_; }

    // Free bytes, refreshing the cached head only when the cached value says
    // fewer than `want` are free (the head's cache line stays on the
    // consumer's core while the ring has room). Returns UINT64_MAX if the
    // consumer published a head outside [tail - capacity, tail].
    uint64_t free_bytes(uint64_t want) {
        uint64_t used = tail_ - head_cache_;
        if (capacity_ - used >= want) return capacity_ - used;
        head_cache_ = shared(c_->head).load(std::memory_order_acquire);  // pairs with (2)
        used = tail_ - head_cache_;
        if (used > capacity_) return UINT64_MAX;
        return capacity_ - used;
    }

    // As free_bytes(), but reloads the head with seq_cst: the producer half
    // of the space doorbell, for a producer that just announced it sleeps.
    uint64_t free_bytes_before_sleep() {
        head_cache_ = shared(c_->head).load(std::memory_order_seq_cst);
        uint64_t used = tail_ - head_cache_;
        return used > capacity_ ? UINT64_MAX : capacity_ - used;
    }

    // Copies n bytes at the private tail (caller checked free_bytes >= n).
    void write(const void *src, uint64_t n) {
        const uint64_t at = tail_ & mask_;
        const uint64_t first = n < capacity_ - at ? n : capacity_ - at;
        std::memcpy(data_ + at, src, first);
        if (n > first) std::memcpy(data_, static_cast<const uint8_t *>(src) + first, n - first);
        tail_ += n;
    }
    // Pointer to the next 8 bytes; frames are 8-aligned so a header never wraps.
    uint8_t *header_slot() { return data_ + (tail_ & mask_); }
    void skip(uint64_t n) { tail_ += n; }

    // Makes everything written so far visible and rings the consumer's bell
    // if it sleeps. `asymmetric`: both sides use (3'), see the top.
    void publish(bool asymmetric) {
        if (asymmetric) {
            shared(c_->tail).store(tail_, std::memory_order_release);  // (1), first half of (3')
            std::atomic_signal_fence(std::memory_order_seq_cst);       // keep store-then-load
            if (shared(c_->data_waiting).load(std::memory_order_relaxed)) ring_bell(c_->data_seq);
            return;
        }
        // seq_cst store: the release of (1), and the first half of (3).
        shared(c_->tail).store(tail_, std::memory_order_seq_cst);
        if (shared(c_->data_waiting).load(std::memory_order_seq_cst)) ring_bell(c_->data_seq);
    }

    RingControl *control() const { return c_; }

  private:
    RingControl *c_ = nullptr;
    uint8_t *data_ = nullptr;
    uint64_t mask_ = 0;
    uint64_t capacity_ = 0;
    uint64_t tail_ = 0;        // private truth
    uint64_t head_cache_ = 0;  // last head seen
};

// The consumer's view of a ring.
class RingReader {
  public:
    RingReader() = default;
    RingReader(RingControl *control, const uint8_t *data, uint64_t capacity)
        : c_(control), data_(data), mask_(capacity - 1), capacity_(capacity) {}

    uint64_t capacity() const { return capacity_; }

    // Bytes ready to read, refreshing the cached tail only when the cached
    // value shows fewer than `want`: a consumer that is behind drains a batch
    // of frames without touching the producer's cache line for each one.
    // UINT64_MAX if the producer published a tail more than `capacity` ahead
    // of our head (or behind it).
    uint64_t available(uint64_t want) {
        uint64_t ready = tail_cache_ - head_;
        if (ready >= want) return ready;
        tail_cache_ = shared(c_->tail).load(std::memory_order_acquire);  // pairs with (1)
        ready = tail_cache_ - head_;
        return ready > capacity_ ? UINT64_MAX : ready;
    }
    // Reloads the tail with seq_cst: the second half of (3), for a consumer
    // that just announced it is about to sleep.
    uint64_t available_before_sleep() {
        tail_cache_ = shared(c_->tail).load(std::memory_order_seq_cst);
        const uint64_t ready = tail_cache_ - head_;
        return ready > capacity_ ? UINT64_MAX : ready;
    }

    void read(void *dst, uint64_t n) {
        const uint64_t at = head_ & mask_;
        const uint64_t first = n < capacity_ - at ? n : capacity_ - at;
        std::memcpy(dst, data_ + at, first);
        if (n > first) std::memcpy(static_cast<uint8_t *>(dst) + first, data_, n - first);
        head_ += n;
    }
    const uint8_t *header_slot() const { return data_ + (head_ & mask_); }
    void skip(uint64_t n) { head_ += n; }

    // Hands the consumed bytes back to the producer and wakes it if it waits
    // for space. `asymmetric` as for RingWriter::publish.
    void release(bool asymmetric) {
        if (asymmetric) {
            shared(c_->head).store(head_, std::memory_order_release);  // (2), first half of (3')
            std::atomic_signal_fence(std::memory_order_seq_cst);
            if (shared(c_->space_waiting).load(std::memory_order_relaxed)) ring_bell(c_->space_seq);
            return;
        }
        // seq_cst store: the release of (2), and the first half of the space
        // doorbell's Dekker pair.
        shared(c_->head).store(head_, std::memory_order_seq_cst);
        if (shared(c_->space_waiting).load(std::memory_order_seq_cst)) ring_bell(c_->space_seq);
    }

    RingControl *control() const { return c_; }

  private:
    RingControl *c_ = nullptr;
    const uint8_t *data_ = nullptr;
    uint64_t mask_ = 0;
    uint64_t capacity_ = 0;
    uint64_t head_ = 0;        // private truth
    uint64_t tail_cache_ = 0;  // last tail seen
};

}  // namespace deputy::channel::shm
