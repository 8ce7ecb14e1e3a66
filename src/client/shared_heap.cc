#include "client/shared_heap.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace deputy::client {
namespace {

constexpr size_t kPage = 4096;
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::atomic<SharedHeap *> g_heap{nullptr};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// $DEPUTY_HEAP_BYTES, else the machine's memory: the heap is address space
// until touched, and a process cannot use more than that anyway. This runs
// inside the first large malloc: getenv and sysconf allocate nothing.
size_t wanted_size() {
    if (const char *v = std::getenv("DEPUTY_HEAP_BYTES"); v && *v) {
        char *end = nullptr;
        errno = 0;
        const unsigned long long n = std::strtoull(v, &end, 0);
        if (errno != 0 || end == v || *end != '\0') return 0;
        return round_up(size_t(n), size_t(2) << 20);
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return size_t(16) << 30;
    return round_up(size_t(pages) * size_t(page), size_t(2) << 20);
}

// Where a memfd of `size` bytes is mapped for the heap: shared, never
// inherited by fork (the child handler makes its own), huge pages where
// the kernel allows them on shmem. The first time (at == nullptr) at an
// address aligned to kMaxAlign, so that block alignment is offset alignment.
void *map_heap(int fd, size_t size, void *at) {
    const bool reserved = at == nullptr;
    if (reserved) {
        const size_t align = SharedHeap::kMaxAlign;
        void *area = mmap(nullptr, size + align, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (area == MAP_FAILED) return nullptr;
        const uintptr_t start = reinterpret_cast<uintptr_t>(area);
        const uintptr_t aligned = (start + align - 1) & ~uintptr_t(align - 1);
        if (aligned > start) munmap(area, aligned - start);
        if (const size_t tail = align - (aligned - start))
            munmap(reinterpret_cast<void *>(aligned + size), tail);
        at = reinterpret_cast<void *>(aligned);
    }
    void *p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        if (reserved) munmap(at, size);
        return nullptr;
    }
    madvise(p, size, MADV_DONTFORK);
    madvise(p, size, MADV_HUGEPAGE);  // shmem_enabled=advise honours it; otherwise a no-op
    return p;
}

int make_memfd(size_t size) {
    const int fd = memfd_create("deputy-heap", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    if (ftruncate(fd, off_t(size)) != 0 || fcntl(fd, F_ADD_SEALS, kSizeSeals) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

SharedHeap *SharedHeap::existing() { return g_heap.load(std::memory_order_acquire); }

SharedHeap *SharedHeap::instance() {
    if (SharedHeap *h = existing()) return h;
    // No std::call_once: a disabled heap is asked again and again (every
    // large malloc) and must answer with one load after the first time.
    static std::atomic<int> state{0};  // 0 untried, 1 trying, 2 done
    int expected = 0;
    if (state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        // Placement-new into static storage: operator new would call the
        // malloc we are inside of (for a small block, but still).
        alignas(SharedHeap) static unsigned char storage[sizeof(SharedHeap)];
        auto *heap = new (storage) SharedHeap();
        const size_t size = wanted_size();
        if (size != 0 && heap->create(size)) {
            pthread_atfork(before_fork, after_fork_parent, after_fork_child);
            g_heap.store(heap, std::memory_order_release);
        }
        state.store(2, std::memory_order_release);
    } else {
        while (state.load(std::memory_order_acquire) != 2) sched_yield();
    }
    return existing();
}

bool SharedHeap::create(size_t bytes) {
    fd_ = make_memfd(bytes);
    if (fd_ < 0) return false;
    void *p = map_heap(fd_, bytes, nullptr);
    if (!p) {
        ::close(fd_);
        fd_ = -1;
        return false;
    }
    base_ = reinterpret_cast<uintptr_t>(p);
    size_ = bytes;
    return true;
}

void SharedHeap::punch(size_t offset, size_t len) {
    if (len) fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(offset), off_t(len));
}

void *SharedHeap::allocate(size_t bytes, size_t align, bool zeroed) {
    if (bytes == 0 || bytes > size_ || align > kMaxAlign || (align & (align - 1))) return nullptr;
    align = align < kPage ? kPage : align;
    const size_t need = round_up(bytes, kPage);
    std::unique_lock lock(mutex_);
    size_t offset = SIZE_MAX;
    bool dirty = false;
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
        const size_t start = round_up(it->first, align);
        const size_t end = it->first + it->second.len;
        if (start > end || end - start < need) continue;
        const size_t hole_at = it->first;
        const Hole hole = it->second;
        holes_.erase(it);
        if (hole.dirty) dirty_bytes_ -= hole.len;
        if (start > hole_at) insert_free(hole_at, start - hole_at, hole.dirty);
        if (end > start + need) insert_free(start + need, end - start - need, hole.dirty);
        offset = start;
        dirty = hole.dirty;
        break;
    }
    size_t dirty_bytes = dirty ? need : 0;
    if (offset == SIZE_MAX) {
        const size_t start = round_up(top_, align);
        if (start > size_ || size_ - start < need) return nullptr;
        // The gap below an aligned start keeps what it held: dirty if it
        // lies below high_.
        if (start > top_) insert_free(top_, start - top_, top_ < high_);
        offset = start;
        top_ = start + need;
        // Pages between here and high_ were used before and kept.
        dirty_bytes = high_ > start ? std::min(high_, top_) - start : 0;
        high_ = std::max(high_, top_);
    }
    used_[offset] = need;
    live_bytes_ += need;
    lock.unlock();
    void *p = reinterpret_cast<void *>(base_ + offset);
    if (zeroed && dirty_bytes) std::memset(p, 0, dirty_bytes);
    return p;
}

// Adds a hole, merging it with the holes around it; a hole that reaches
// top_ lowers top_ instead (its pages stay, up to high_, for reuse).
void SharedHeap::insert_free(size_t offset, size_t len, bool dirty) {
    auto next = holes_.lower_bound(offset);
    if (next != holes_.end() && offset + len == next->first) {
        dirty = dirty || next->second.dirty;
        if (next->second.dirty) dirty_bytes_ -= next->second.len;
        len += next->second.len;
        next = holes_.erase(next);
    }
    if (next != holes_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second.len == offset) {
            dirty = dirty || prev->second.dirty;
            if (prev->second.dirty) dirty_bytes_ -= prev->second.len;
            offset = prev->first;
            len += prev->second.len;
            holes_.erase(prev);
        }
    }
    if (offset + len == top_) {
        top_ = offset;
        return;
    }
    holes_[offset] = Hole{len, dirty};
    if (dirty) dirty_bytes_ += len;
}

size_t SharedHeap::kept_bytes() const { return dirty_bytes_ + (high_ - top_); }

// Gives pages back until what is kept is half the limit: first the span
// above top_ (freed last, the likeliest to be wanted again is lower), then
// holes in address order.
void SharedHeap::trim_dirty() {
    punch(top_, high_ - top_);
    high_ = top_;
    for (auto &[offset, hole] : holes_) {
        if (dirty_bytes_ <= kKeepDirtyBytes / 2) break;
        if (!hole.dirty) continue;
        punch(offset, hole.len);
        hole.dirty = false;
        dirty_bytes_ -= hole.len;
    }
}

bool SharedHeap::release(void *p) {
    if (!contains(p)) return false;
    const size_t offset = reinterpret_cast<uintptr_t>(p) - base_;
    std::lock_guard lock(mutex_);
    auto it = used_.find(offset);
    if (it == used_.end()) return false;
    const size_t len = it->second;
    used_.erase(it);
    live_bytes_ -= len;
    insert_free(offset, len, true);
    if (kept_bytes() > kKeepDirtyBytes) trim_dirty();
    return true;
}

size_t SharedHeap::usable_size(const void *p) const {
    if (!contains(p)) return 0;
    std::lock_guard lock(mutex_);
    auto it = used_.find(reinterpret_cast<uintptr_t>(p) - base_);
    return it == used_.end() ? 0 : it->second;
}

SharedHeap::Stats SharedHeap::stats() const {
    std::lock_guard lock(mutex_);
    return Stats{live_bytes_, used_.size(), kept_bytes(), top_};
}

// fork copies the live blocks into a new memfd in the parent, before the
// child exists, so that the child's copy is the heap as it was at fork
// (copied in the child, it would pick up what the parent writes meanwhile).
// The child maps it in place of the heap; the parent closes its fd.
void SharedHeap::before_fork() {
    SharedHeap *h = existing();
    if (!h) return;
    h->mutex_.lock();
    h->child_fd_ = make_memfd(h->size_);
    if (h->child_fd_ >= 0 && !h->copy_live_blocks(h->child_fd_)) {
        ::close(h->child_fd_);
        h->child_fd_ = -1;
    }
}

void SharedHeap::after_fork_parent() {
    SharedHeap *h = existing();
    if (!h) return;
    if (h->child_fd_ >= 0) ::close(h->child_fd_);
    h->child_fd_ = -1;
    h->mutex_.unlock();
}

void SharedHeap::after_fork_child() {
    if (SharedHeap *h = existing()) {
        h->remake_in_child();
        h->mutex_.unlock();
    }
}

bool SharedHeap::copy_live_blocks(int to_fd) const {
    for (const auto &[offset, len] : used_) {
        size_t done = 0;
        while (done < len) {
            const ssize_t n = pwrite(to_fd, reinterpret_cast<const void *>(base_ + offset + done),
                                     len - done, off_t(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            done += size_t(n);
        }
    }
    return true;
}

// In the child of fork: the heap's range is unmapped here (MADV_DONTFORK).
// The copy the parent made goes there. Without one (the parent could not
// make it), the child copies from the parent's memfd itself, racing with
// the parent's writes: better than no heap at all.
void SharedHeap::remake_in_child() {
    int fd = child_fd_;
    child_fd_ = -1;
    const bool copied = fd >= 0;
    if (!copied) fd = make_memfd(size_);
    if (fd < 0 || !map_heap(fd, size_, reinterpret_cast<void *>(base_))) {
        std::fputs("deputy: fork: could not remake the shared heap in the child\n", stderr);
        std::abort();
    }
    if (!copied) {
        for (const auto &[offset, len] : used_) {
            size_t done = 0;
            while (done < len) {
                const ssize_t n = pread(fd_, reinterpret_cast<void *>(base_ + offset + done),
                                        len - done, off_t(offset + done));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) {
                    std::fputs("deputy: fork: could not copy the shared heap into the child\n",
                               stderr);
                    std::abort();
                }
                done += size_t(n);
            }
        }
    }
    ::close(fd_);
    fd_ = fd;
    // The new memfd is zeros wherever no block was copied.
    for (auto &[offset, hole] : holes_) hole.dirty = false;
    dirty_bytes_ = 0;
    high_ = top_;
}

}  // namespace deputy::client
