// malloc, free and their relatives for an unmodified program: blocks of at
// least $DEPUTY_HEAP_MIN_BYTES (default 64 KiB) come from deputy's shared
// heap (include/deputy/heap.h), which the agent maps, so the buffers a
// program hands to MPI_Iallreduce & co. are reached in place instead of
// copied through process_vm_readv/writev; smaller blocks, and every block
// once the heap is full or disabled, come from the C library's malloc.
//
// Compiled into libdeputy-mpi (which is preloaded or linked first anyway)
// and into libdeputy-heap.so, the same for programs that are not MPI.
// glibc supports replacing malloc this way ("Replacing malloc" in its
// manual: malloc, free, calloc and realloc together, and the aligned and
// usable-size functions); its __libc_* entry points serve the small blocks.
// Every function here may run before any constructor (the dynamic loader
// and other libraries allocate first), so nothing here needs one.
#include <deputy/heap.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" {
void *__libc_malloc(size_t bytes);
void __libc_free(void *p);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t bytes);
void *__libc_memalign(size_t alignment, size_t bytes);
}

#define DEPUTY_INTERPOSE extern "C" __attribute__((visibility("default")))

namespace {

constexpr size_t kDefaultMinBytes = size_t(64) << 10;
constexpr size_t kPage = 4096;

// 0: not read yet. Read once, on the first large-enough request; a racing
// second reader reads the same environment.
std::atomic<size_t> g_min_bytes{0};

size_t min_bytes() {
    size_t v = g_min_bytes.load(std::memory_order_relaxed);
    if (v != 0) return v;
    v = kDefaultMinBytes;
    if (const char *s = std::getenv("DEPUTY_HEAP_MIN_BYTES"); s && *s) {
        char *end = nullptr;
        const unsigned long long n = std::strtoull(s, &end, 0);
        if (end != s && *end == '\0') v = n == 0 ? 1 : size_t(n);
    }
    g_min_bytes.store(v, std::memory_order_relaxed);
    return v;
}

bool wants_heap(size_t bytes) { return bytes >= kPage && bytes >= min_bytes(); }

// Owns the pointer: our heap, so only dp_heap_* may touch it.
bool ours(const void *p) { return p != nullptr && dp_heap_contains(p, 1); }

size_t libc_usable_size(void *p) {
    using Fn = size_t (*)(void *);
    static std::atomic<Fn> fn{nullptr};
    Fn f = fn.load(std::memory_order_acquire);
    if (!f) {
        f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
        fn.store(f, std::memory_order_release);
    }
    return f ? f(p) : 0;
}

void *aligned(size_t alignment, size_t bytes) {
    if (wants_heap(bytes))
        if (void *p = dp_heap_alloc(bytes, alignment, 0)) return p;
    return __libc_memalign(alignment, bytes);
}

}  // namespace

DEPUTY_INTERPOSE void *malloc(size_t bytes) {
    if (wants_heap(bytes))
        if (void *p = dp_heap_alloc(bytes, 0, 0)) return p;
    return __libc_malloc(bytes);
}

DEPUTY_INTERPOSE void free(void *p) {
    if (ours(p) && dp_heap_free(p)) return;
    __libc_free(p);
}

DEPUTY_INTERPOSE void *calloc(size_t n, size_t size) {
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return nullptr;
    }
    if (wants_heap(bytes))
        if (void *p = dp_heap_alloc(bytes, 0, 1)) return p;
    return __libc_calloc(n, size);
}

DEPUTY_INTERPOSE void *realloc(void *p, size_t bytes) {
    if (!ours(p)) {
        if (p == nullptr || !wants_heap(bytes)) return __libc_realloc(p, bytes);
        // A C-library block grows into the heap.
        void *q = dp_heap_alloc(bytes, 0, 0);
        if (!q) return __libc_realloc(p, bytes);
        const size_t old = libc_usable_size(p);
        std::memcpy(q, p, old < bytes ? old : bytes);
        __libc_free(p);
        return q;
    }
    if (bytes == 0) {  // as glibc: frees and returns NULL
        dp_heap_free(p);
        return nullptr;
    }
    const size_t have = dp_heap_usable_size(p);
    // Shrinking, or growing within the block's pages: stays. Shrinking far
    // below the threshold moves to the C library (and frees the pages).
    if (bytes <= have && wants_heap(bytes)) return p;
    void *q = wants_heap(bytes) ? dp_heap_alloc(bytes, 0, 0) : nullptr;
    if (!q) q = __libc_malloc(bytes);
    if (!q) return nullptr;  // errno is ENOMEM; p is untouched, as realloc promises
    std::memcpy(q, p, have < bytes ? have : bytes);
    dp_heap_free(p);
    return q;
}

DEPUTY_INTERPOSE void *reallocarray(void *p, size_t n, size_t size) {
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return nullptr;
    }
    return realloc(p, bytes);
}

DEPUTY_INTERPOSE int posix_memalign(void **out, size_t alignment, size_t bytes) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1))) return EINVAL;
    void *p = aligned(alignment, bytes);
    if (!p && bytes != 0) return ENOMEM;
    *out = p;
    return 0;
}

DEPUTY_INTERPOSE void *aligned_alloc(size_t alignment, size_t bytes) {
    if (alignment == 0 || (alignment & (alignment - 1))) {
        errno = EINVAL;
        return nullptr;
    }
    return aligned(alignment, bytes);
}

DEPUTY_INTERPOSE void *memalign(size_t alignment, size_t bytes) { return aligned(alignment, bytes); }

DEPUTY_INTERPOSE void *valloc(size_t bytes) { return aligned(kPage, bytes); }

DEPUTY_INTERPOSE void *pvalloc(size_t bytes) {
    return aligned(kPage, (bytes + kPage - 1) / kPage * kPage);
}

DEPUTY_INTERPOSE size_t malloc_usable_size(void *p) {
    if (ours(p))
        if (size_t n = dp_heap_usable_size(p)) return n;
    return p ? libc_usable_size(p) : 0;
}
