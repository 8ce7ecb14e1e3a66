// dp_malloc's allocator: first fit over the mapped pool with coalescing
// frees. A mutex and two ordered maps are enough: dp_malloc is rare, and
// the one allocation on a hot path (a vector collective's counts block, one
// per post) reuses pages already faulted in, which a bitmap remembers so it
// costs no system call. 64-byte alignment keeps every block on its own
// cache lines and suits the mover's completion records (32 B).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace deputy::client {

class PoolAllocator {
  public:
    static constexpr size_t kAlign = 64;

    void reset(std::byte *base, size_t bytes);
    // nullptr when no free block is large enough (or bytes == 0).
    void *allocate(size_t bytes);
    // false for a pointer this pool did not hand out (nothing changes).
    bool release(void *ptr);
    bool contains(const void *ptr, size_t bytes) const;
    size_t free_bytes() const;

  private:
    mutable std::mutex mutex_;
    std::byte *base_ = nullptr;
    size_t bytes_ = 0;
    std::map<size_t, size_t> free_;  // offset -> length, never adjacent
    std::map<size_t, size_t> used_;  // offset -> length
    // One bit per page of the pool, set once the page is faulted in: the
    // pool is never given back to the kernel, so a page stays in.
    std::vector<uint64_t> faulted_;
    bool faulted_in(size_t offset, size_t bytes) const;  // (mutex_ held)
    void mark_faulted(size_t offset, size_t bytes);      // (mutex_ held)
};

}  // namespace deputy::client
