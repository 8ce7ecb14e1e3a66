#include "common/scratch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace deputy::scratch {
namespace {

// Mappings are whole powers of two from 64 KiB: a freed one fits the next
// request of its class, whatever its exact size.
constexpr size_t kMinClass = 64 << 10;
// What one thread keeps between uses; beyond it buffers are unmapped at once.
constexpr size_t kMaxCachedBytes = 256ull << 20;

size_t size_class(size_t bytes) {
    size_t c = kMinClass;
    while (c < bytes) c <<= 1;
    return c;
}

struct Cache {
    struct Entry {
        uint8_t *data;
        size_t capacity;
    };
    std::vector<Entry> free;
    size_t bytes = 0;
    ~Cache() { drop(); }
    void drop() {
        for (const Entry &e : free) munmap(e.data, e.capacity);
        free.clear();
        bytes = 0;
    }
};

Cache &cache() {
    thread_local Cache c;
    return c;
}

}  // namespace

Buffer get(size_t bytes) {
    Buffer b;
    if (bytes == 0) return b;
    const size_t capacity = size_class(bytes);
    Cache &c = cache();
    for (size_t i = 0; i < c.free.size(); ++i) {
        if (c.free[i].capacity != capacity) continue;
        b.data_ = c.free[i].data;
        b.capacity_ = capacity;
        b.size_ = bytes;
        c.bytes -= capacity;
        c.free[i] = c.free.back();
        c.free.pop_back();
        return b;
    }
    void *p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return b;
    b.data_ = static_cast<uint8_t *>(p);
    b.capacity_ = capacity;
    b.size_ = bytes;
    return b;
}

void Buffer::reset() {
    if (data_ == nullptr) return;
    Cache &c = cache();
    if (c.bytes + capacity_ <= kMaxCachedBytes) {
        c.free.push_back({data_, capacity_});
        c.bytes += capacity_;
    } else {
        munmap(data_, capacity_);
    }
    data_ = nullptr;
    size_ = capacity_ = 0;
}

void trim() {
    cache().drop();
}

size_t cached_bytes() {
    return cache().bytes;
}

}  // namespace deputy::scratch
