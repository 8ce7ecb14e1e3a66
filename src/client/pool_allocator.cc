#include "client/pool_allocator.h"

namespace deputy::client {

void PoolAllocator::reset(std::byte *base, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    base_ = base;
    bytes_ = bytes;
    free_.clear();
    used_.clear();
    if (bytes) free_[0] = bytes;
}

void *PoolAllocator::allocate(size_t bytes) {
    if (bytes == 0 || bytes > bytes_) return nullptr;
    const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < need) continue;
        const size_t offset = it->first, left = it->second - need;
        free_.erase(it);
        if (left) free_[offset + need] = left;
        used_[offset] = need;
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
