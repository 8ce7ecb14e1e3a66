/* deputy — the shared heap: ordinary memory the agent reaches in place.
 *
 * Memory from dp_heap_alloc behaves like malloc's: it belongs to the
 * process, not to a context, so it can be allocated before dp_init and
 * outlives dp_finalize. What differs is where it lives: one sealed memfd per
 * process, which every context shares with its agent at dp_init. Buffers in
 * it are reached by the agent's engines in place (like dp_malloc memory,
 * "mapped" mode, zero copies) instead of through process_vm_readv/writev
 * ("direct" mode, two kernel copies per byte), and need no dp_mem_register.
 *
 * Unmodified programs get it without a change: libdeputy-mpi (and
 * libdeputy-heap.so, for programs that are not MPI) put every malloc, calloc,
 * realloc and aligned allocation of at least $DEPUTY_HEAP_MIN_BYTES
 * (default 64 KiB) here, and the rest in the C library's malloc.
 *
 * Its size is fixed when the process first uses it: $DEPUTY_HEAP_BYTES, or
 * the machine's physical memory (address space only; pages are committed as
 * they are touched). $DEPUTY_HEAP_BYTES=0 disables it (every call below then
 * returns NULL / 0). Differences from malloc'd memory a program may notice:
 *  - fork: the child gets a copy of the blocks in use (made during fork, in
 *    proportion to their size), as with private memory;
 *  - madvise(MADV_DONTNEED) on it keeps the contents (shared memory) and
 *    MADV_FREE is refused. */
#ifndef DEPUTY_HEAP_H
#define DEPUTY_HEAP_H

#include <deputy/export.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* At least `bytes`, aligned to `alignment` (a power of two up to 2 MiB;
 * 0 = page size). Zero-filled when `zeroed` is non-zero. NULL when the heap
 * is full or disabled, or for bytes == 0. */
DP_API void *dp_heap_alloc(size_t bytes, size_t alignment, int zeroed);

/* Frees a block of dp_heap_alloc. Returns 0 (and does nothing) when `ptr`
 * is not the start of one, so an allocator layered on top can hand other
 * pointers to its own free. */
DP_API int dp_heap_free(void *ptr);

/* Non-zero when [ptr, ptr+bytes) lies inside the heap (any block or not):
 * one comparison, safe to call on every free(). */
DP_API int dp_heap_contains(const void *ptr, size_t bytes);

/* The usable bytes of the block starting at `ptr`; 0 when it is not one. */
DP_API size_t dp_heap_usable_size(const void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* DEPUTY_HEAP_H */
