#include "client/pool_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace deputy::client {
namespace {

const uintptr_t kPage = uintptr_t(sysconf(_SC_PAGESIZE));

// The pool is mapped lazily (an attached process commits nothing until it
// allocates); memory handed out is faulted in now, so that first touches
// happen here and not inside a timed loop or on the agent's engines.
void prefault(std::byte *p, size_t bytes) {
    const uintptr_t page = kPage;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) & ~(page - 1);
#ifdef MADV_POPULATE_WRITE
    if (madvise(reinterpret_cast<void *>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return;
#endif
    // Kernels before 5.14: write each page's first byte back to itself.
    for (uintptr_t at = begin; at < end; at += page) {
        auto *byte = reinterpret_cast<volatile std::byte *>(at);
        *byte = *byte;
    }
}

}  // namespace

void PoolAllocator::reset(std::byte *base, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    base_ = base;
    bytes_ = bytes;
    free_.clear();
    used_.clear();
    if (bytes) free_[0] = bytes;
    faulted_.assign((bytes / kPage + 2 + 63) / 64, 0);  // (+2: base_ unaligned)
}

// The pages [first, last] that [offset, offset + bytes) of the pool
// touches, counted from the page that holds base_.
bool PoolAllocator::faulted_in(size_t offset, size_t bytes) const {
    const uintptr_t first = reinterpret_cast<uintptr_t>(base_) / kPage;
    const uintptr_t from = (reinterpret_cast<uintptr_t>(base_) + offset) / kPage - first;
    const uintptr_t to = (reinterpret_cast<uintptr_t>(base_) + offset + bytes - 1) / kPage - first;
    for (uintptr_t page = from; page <= to; ++page)
        if (!(faulted_[page / 64] >> (page % 64) & 1)) return false;
    return true;
}

void PoolAllocator::mark_faulted(size_t offset, size_t bytes) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(base_) / kPage;
    const uintptr_t from = (reinterpret_cast<uintptr_t>(base_) + offset) / kPage - first;
    const uintptr_t to = (reinterpret_cast<uintptr_t>(base_) + offset + bytes - 1) / kPage - first;
    for (uintptr_t page = from; page <= to; ++page)
        faulted_[page / 64] |= uint64_t(1) << (page % 64);
}

void *PoolAllocator::allocate(size_t bytes) {
    if (bytes == 0 || bytes > bytes_) return nullptr;
    const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
    std::unique_lock<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < need) continue;
        const size_t offset = it->first, left = it->second - need;
        free_.erase(it);
        if (left) free_[offset + need] = left;
        used_[offset] = need;
        if (faulted_in(offset, need)) return base_ + offset;
        lock.unlock();
        prefault(base_ + offset, need);
        lock.lock();
        mark_faulted(offset, need);
        return base_ + offset;
    }
    return nullptr;
}

bool PoolAllocator::release(void *ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto *p = static_cast<std::byte *>(ptr);
    if (p < base_ || p >= base_ + bytes_) return false;
    auto used = used_.find(size_t(p - base_));
    if (used == used_.end()) return false;
    size_t offset = used->first, length = used->second;
    used_.erase(used);
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + length == next->first) {
        length += next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == offset) {
            prev->second += length;
            return true;
        }
    }
    free_[offset] = length;
    return true;
}

bool PoolAllocator::contains(const void *ptr, size_t bytes) const {
    auto *p = static_cast<const std::byte *>(ptr);
    return p >= base_ && size_t(p - base_) <= bytes_ && bytes <= bytes_ - size_t(p - base_);
}

size_t PoolAllocator::free_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t total = 0;
    for (auto &[offset, length] : free_) total += length;
    return total;
}

}  // namespace deputy::client
